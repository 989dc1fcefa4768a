"""Peak events of the step, one module per row prefix: ``gathered`` (``hbm.gathered.*``,
with ZeRO-3's reuse-distance walk in ``reuse``), ``buckets`` (``hbm.buckets.*``,
``hbm.grads_unsharded.*``), ``optimizer_step`` (``hbm.optimizer_step.*``),
``dequantize`` (``hbm.dequantized.*``), ``runtime`` (``hbm.runtime.*``) and
``checkpoint_event`` (``hbm.checkpoint.*``).
"""
