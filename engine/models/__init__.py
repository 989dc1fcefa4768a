"""Model architectures: a compact spec, and the exact tensor inventory it implies.

Modules: ``spec`` (ArchitectureSpec), ``tensor`` (Tensor, Role), ``roles`` (TP / EP /
embedding facts per role), ``layouts`` + ``attention`` + ``feedforward`` (family
layouts), ``inventory`` (build_inventory), ``summary`` (totals, per-layer table),
``presets`` (catalogue in resources/models), ``hf_config`` (config.json import),
``safetensors_index`` (header-only checkpoint counts), ``importer`` (model folders).
"""
