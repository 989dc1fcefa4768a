"""The ledger: named rows of bytes, each with its formula and source.

A row id's prefix names the module that builds it, and one grep of the id (quoted)
finds the line:

==================================================  =======================================
row id                                              built in ``engine.ledger.``
==================================================  =======================================
``hbm.weights*``, ``hbm.grads``, ``hbm.master_*``    ``states.rows`` (NF4: ``states.quantized``)
``hbm.optimizer.*``                                 ``states.rows``
``host.offload.*``, ``nvme.offload.*`` (moved)      ``states.moved`` (via ``states.offload``)
``hbm.offload.*``, ``*.offload.*`` (ZeRO buffers)   ``states.offload_deepspeed``
``hbm.activations.*``, ``host.activations.*``       ``activations.rows``
``hbm.inputs.*``, ``hbm.buffers.*``                 ``activations.inputs``
``hbm.loss.*``                                      ``activations.loss`` (compiled, torchtitan's
                                                    chunked: ``activations.loss_modes``;
                                                    torchtune's chunked output:
                                                    ``activations.loss_torchtune``)
``hbm.comm.*`` (CP K/V, EP all-to-all buffers)      ``activations.exchange``
``hbm.gathered.*``                                  ``peaks.gathered``
``hbm.buckets.*``, ``hbm.grads_unsharded.*``        ``peaks.buckets``
``hbm.optimizer_step.*``                            ``peaks.optimizer_step``
``hbm.dequantized.*``                               ``peaks.dequantize``
``hbm.runtime.*``                                   ``peaks.runtime``
``hbm.checkpoint.*``                                ``peaks.checkpoint_event``
``host.*`` (the rest)                               ``nodes.host``
``nvme.checkpoints.*``                              ``nodes.nvme``
``checkpoint.*``                                    ``nodes.checkpoint_storage``
==================================================  =======================================

Ids built from data rather than written out are listed in :data:`DYNAMIC_IDS`.
"""

DYNAMIC_IDS: tuple[tuple[str, str], ...] = (
    ("hbm.optimizer.{state}", "engine.ledger.states.rows"),
    ("{location}.offload.{hbm_id}", "engine.ledger.states.moved"),
)
"""Row ids built by f-string: (pattern, the module that builds it). ``{state}`` is an
optimizer state's name (``exp_avg``, ``exp_avg_sq``, ``step``, … from
``engine.ledger.states.optimizers.state_allocs``); ``{location}`` is ``host`` or
``nvme`` and ``{hbm_id}`` the id of the HBM row moved there, without ``hbm.``."""
