"""Peak events of the step, one module per row prefix: ``gathered`` (``hbm.gathered.*``),
``buckets`` (``hbm.buckets.*``, ``hbm.grads_unsharded.*``), ``optimizer_step``
(``hbm.optimizer_step.*``), ``runtime`` (``hbm.runtime.*``) and ``checkpoint_event``
(``hbm.checkpoint.*``).
"""
