"""Activation rows (``hbm.activations.*``, ``hbm.inputs.*``, ``hbm.loss.*``), per
implementation profile."""
