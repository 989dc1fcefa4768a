"""Peak events of the step (``hbm.gathered.*``, ``hbm.buckets.*``, ``hbm.optimizer_step.*``,
``hbm.runtime.*``, ``hbm.checkpoint.*``).
"""
