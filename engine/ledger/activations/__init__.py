"""Activation rows, per implementation profile: ``rows`` (``hbm.activations.*``),
``inputs`` (``hbm.inputs.*``, ``hbm.buffers.*``), ``loss`` (``hbm.loss.*``); ``schedule``
says how many micro-batches a stage holds, ``geometry`` the shapes, ``hf``,
``megatron`` and ``torchtitan`` what one layer saves; ``loss_modes`` the compiled and
torchtitan's chunked losses."""
