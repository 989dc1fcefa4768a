"""``memplan trace``: measure the plan's training step on fake tensors, without a GPU.

The optional extra ``memplan[trace]`` (torch, transformers, peft) is imported only when
a trace runs: :mod:`engine.trace.extra` says whether it is installed without importing
it, :mod:`engine.trace.support` which plans can be traced (pure Python), and
:mod:`engine.trace.runner` runs one (torch). Modules, one job each: ``hf_arch`` (spec →
transformers config), ``build`` (model on meta), ``method`` (LoRA, recompute),
``dtypes``, ``shard`` (fake process group, TP, FSDP2 / HSDP, DDP), ``optim``,
``patches`` and ``tracker`` (the pitfall fixes), ``steps`` (the training loop),
``result`` (pure data), ``compare`` (traced vs the ledger), ``record`` (a trace as a
measured record), ``alloc_log`` (the allocation events, tagged with FSDP2's side
streams), ``replay`` and ``reserved`` (those events through the allocator simulator,
under the plan's ``PYTORCH_CUDA_ALLOC_CONF``: reserved beside allocated).
"""
