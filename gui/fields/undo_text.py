"""Undo texts in words: "Set data-parallel size to 16", never "Set parallelism.dp".

The Edit menu, the undo history and the unsaved-changes prompt speak to an analyst, who
named the field by its label on screen, not by its dotted path. The common fields get a
curated noun; every other field is named by its label (with its parent's noun when the
label alone is ambiguous, e.g. "LoRA rank", "activation band, low"), so a new plan field
reads sensibly here without new code. Free of Qt, so it is tested on its own.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from engine.plan import Plan
from engine.units import GB
from gui.fields.fieldspec import FieldSpec, choice_text, field_specs, format_bytes_field

FIELD_NOUNS: dict[str, str] = {
    "model.name": "model name",
    "model.architecture.hidden": "hidden size",
    "model.architecture.layers": "layer count",
    "model.architecture.heads": "attention heads",
    "model.architecture.kv_heads": "key/value heads",
    "model.architecture.head_dim": "head dimension",
    "model.architecture.intermediate": "MLP intermediate size",
    "model.architecture.vocab": "vocabulary size",
    "model.architecture.max_position": "maximum position",
    "method.kind": "training method",
    "method.optimizer.name": "optimizer",
    "method.optimizer.implementation": "optimizer implementation",
    "method.precision.policy": "precision policy",
    "method.precision.compute_dtype": "compute dtype",
    "method.precision.grad_dtype": "gradient dtype",
    "method.recompute.policy": "activation recomputation",
    "method.recompute.every_k": "recompute interval",
    "batch.seq_len": "sequence length",
    "batch.micro_batch": "micro-batch size",
    "batch.grad_accum": "gradient accumulation steps",
    "batch.global_batch": "global batch",
    "batch.hold_fixed": "batch size held fixed",
    "parallelism.tp": "tensor-parallel size",
    "parallelism.pp": "pipeline-parallel size",
    "parallelism.cp": "context-parallel size",
    "parallelism.ep": "expert-parallel size",
    "parallelism.expert_tp": "expert tensor-parallel size",
    "parallelism.dp": "data-parallel size",
    "parallelism.virtual_stages": "virtual pipeline stages",
    "parallelism.sequence_parallel": "sequence parallelism",
    "parallelism.strategy": "sharding strategy",
    "parallelism.shard_group_size": "shard group size",
    "parallelism.pp_schedule": "pipeline schedule",
    "parallelism.pp_layer_split": "pipeline layer split",
    "parallelism.pp_layout": "pipeline layout",
    "parallelism.pp_split_policy": "pipeline split policy",
    "parallelism.tp_style": "tensor-parallel style",
    "parallelism.cp_comm": "context-parallel K/V exchange",
    "parallelism.ranks_per_node": "ranks per node",
    "hardware.accelerator": "accelerator",
    "hardware.hbm_bytes": "HBM capacity",
    "hardware.usable_policy": "usable-capacity policy",
    "hardware.usable_hbm_bytes": "usable HBM",
    "hardware.gpus_per_node": "GPUs per node",
    "hardware.host_ram_bytes_per_node": "host RAM per node",
    "hardware.nvme_bytes_per_node": "NVMe per node",
    "hardware.host_link_gbps": "device–host bandwidth",
    "hardware.nvme_gbps": "NVMe bandwidth",
    "offload.optimizer": "optimizer offload",
    "offload.params": "parameter offload",
    "offload.pin_memory": "pinned host memory",
    "offload.step_time_target_s": "step-time target",
    "policy.headroom_percent": "headroom",
    "policy.rounding": "GPU-count rounding",
    "policy.max_gpus": "GPU search bound",
    "runtime.framework": "framework",
    "runtime.attention": "attention kernel",
    "runtime.kv_expanded": "K/V copied to every head",
    "runtime.previous_output_kept": "previous output kept",
    "runtime.loss": "loss implementation",
    "workload.packing": "sequence packing",
    "workload.mean_sample_tokens": "mean sample length",
    "workload.torch_compile": "torch.compile",
    "method.dropout": "model dropout",
    "method.lora.dropout": "LoRA dropout",
    "method.lora.implementation": "LoRA implementation",
    "method.qlora.quant_storage": "QLoRA quant storage dtype",
    "method.qlora.nf4_impl": "NF4 library",
    "method.qlora.quantize_lm_head": "QLoRA 4-bit lm_head",
    "method.optimizer.precision_aware": "precision-aware optimizer",
    "method.optimizer.paged": "paged optimizer",
    "method.optimizer.adam8bit_library": "8-bit AdamW library",
    "method.optimizer.in_backward": "optimizer step in backward",
    "method.precision.float8": "Float8 training",
    "method.precision.float8_all_gather": "Float8 all-gather",
    "method.recompute.modules": "recompute modules",
    "method.recompute.offload_activations": "activation offloading",
    "runtime.loss_impl": "cross-entropy implementation",
    "runtime.zero_grad": "zero_grad mode",
    "runtime.kept_logits": "logits kept by the loop",
    "runtime.bitsandbytes_version": "bitsandbytes version",
    "runtime.transformers_version": "transformers version",
    "runtime.torchtitan_version": "torchtitan version",
    "runtime.reserve_model": "allocator reserve model",
    "runtime.expandable_segments": "expandable segments",
    "runtime.max_split_size_mb": "allocator max split size",
    "acceptance.peak_tolerance_percent": "peak tolerance",
    "acceptance.warmup_steps": "warm-up steps",
    "acceptance.measured_steps": "measured steps",
    "acceptance.steady_window_steps": "steady-state window",
    "acceptance.max_peak_growth_percent": "allowed peak growth",
}
"""Nouns for the fields an analyst edits most (the rest are named from their labels)."""

SECTION_NOUNS: dict[str, str] = {
    "lora": "LoRA",
    "qlora": "QLoRA",
    "custom": "custom subset",
    "optimizer": "optimizer",
    "precision": "precision",
    "recompute": "recomputation",
    "moe": "MoE",
    "mla": "MLA",
    "knobs": "",
    "activation_band": "activation band",
    "allocator_reserve": "allocator reserve",
    "fragmentation": "allocator fragmentation",
    "side_stream_cache": "side-stream cache",
    "cuda_context_bytes": "CUDA context",
    "nccl_bytes_per_communicator": "NCCL per communicator",
    "cublas_workspace_bytes": "cuBLAS workspace",
    "dataloader_worker_bytes": "data-loader worker",
    "process_rss_bytes": "process RSS",
    "checkpoint": "checkpoint",
    "host": "host",
    "workload": "",
    "acceptance": "acceptance",
}
"""How a parent section is named in front of a label that needs it ("" = not needed)."""

AMBIGUOUS_LABELS = frozenset({"name", "kind", "policy", "low", "high", "rank", "count", "format"})
"""Labels that say nothing without their section ("Set low to 0.9": low of what?)."""

ALWAYS_PREFIXED = frozenset({"lora", "qlora", "moe", "mla", "custom"})
"""Sections whose fields read wrongly without their name ("top k" of the MoE router)."""


@lru_cache(maxsize=1)
def _specs() -> dict[str, FieldSpec]:
    """Every leaf field of the plan by dotted path."""
    out: dict[str, FieldSpec] = {}

    def walk(model: Any, prefix: str) -> None:
        for spec in field_specs(model, prefix):
            if spec.kind == "section" and spec.model is not None:
                walk(spec.model, spec.path)
            else:
                out[spec.path] = spec

    for name, info in Plan.model_fields.items():
        walk(info.annotation, name)
    return out


def _lower(label: str) -> str:
    """A label in running text: lower case, acronyms (TP, HBM, LoRA) kept."""
    words = label.split(" ")
    return " ".join(
        w if any(c.isupper() for c in w[1:]) or len(w) == 1 else w.lower() for w in words
    )


def field_noun(path: str) -> str:
    """What the user calls the field at ``path`` ("data-parallel size")."""
    if path in FIELD_NOUNS:
        return FIELD_NOUNS[path]
    spec = _specs().get(path)
    parts = path.split(".")
    label = _lower(spec.label) if spec is not None else parts[-1].replace("_", " ")
    parent = parts[-2] if len(parts) > 1 else ""
    section = SECTION_NOUNS.get(parent, parent.replace("_", " "))
    if label in ("low", "high") and section:
        return f"{section} ({label})"
    needs = label.lower() in AMBIGUOUS_LABELS or parent in ALWAYS_PREFIXED
    if needs and section and section.lower() not in label.lower():
        return f"{section} {label}"
    return label


def value_words(path: str, value: Any) -> str:
    """A value as the field shows it: sizes in GB, on/off, auto, lists joined."""
    spec = _specs().get(path)
    if value is None:
        return "auto"
    if isinstance(value, bool):
        return "on" if value else "off"
    if spec is not None and spec.kind == "bytes" and isinstance(value, int):
        return f"{value / GB:,.2f} GB" if value >= GB else format_bytes_field(value, "gb")
    if isinstance(value, (list, tuple)):
        return ", ".join(str(v) for v in value) or "none"
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, dict):
        return "new values"
    return choice_text(value)


def edit_text(path: str, value: Any) -> str:
    """The undo text of setting one field: "Set data-parallel size to 16"."""
    noun = field_noun(path)
    if isinstance(value, bool):
        return f"Turn {noun} {value_words(path, value)}"
    return f"Set {noun} to {value_words(path, value)}"
