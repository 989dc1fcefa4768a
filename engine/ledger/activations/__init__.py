"""Activation rows, per implementation profile: ``rows`` (``hbm.activations.*``),
``inputs`` (``hbm.inputs.*``, ``hbm.buffers.*``), ``loss`` (``hbm.loss.*``); ``schedule``
says how many micro-batches a stage holds, ``geometry`` the shapes, ``hf`` and
``megatron`` what one layer saves."""
