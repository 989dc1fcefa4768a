"""Model architectures: a compact spec, and the exact tensor inventory it implies.

Modules: ``spec`` (ArchitectureSpec), ``tensor`` (Tensor, Role), ``roles`` (TP / EP /
embedding facts per role), ``layouts`` + ``attention`` + ``feedforward`` (family
layouts), ``inventory`` (build_inventory), ``summary`` (totals, per-layer table),
``presets`` (catalogue in resources/models), ``hf_config`` + ``hf_reader`` + ``hf_dense``
+ ``hf_moe`` (config.json import with transformers' per-family defaults), ``mtp``
(DeepSeek-V3's multi-token prediction), ``classic_layouts`` (GPT-2, NeoX, Falcon),
``safetensors_index`` (header-only checkpoint counts), ``importer`` (model folders),
``hf_cache`` (lookup by model id in the local Hugging Face cache).
"""
