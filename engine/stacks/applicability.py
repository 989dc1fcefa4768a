"""Which inputs do not apply to the chosen strategy, and why (shown as a tooltip).

Fields that do not apply are disabled, never hidden: an analyst comparing two plans
should see the same form, with the reason a knob has no effect right beside it.
"""

from __future__ import annotations

from engine.plan import Plan
from engine.sections.parallel import HYBRID_STRATEGIES

_DS = ("zero1", "zero2", "zero3")


def inapplicable(plan: Plan) -> dict[str, str]:
    """Field-path prefixes that have no effect on this plan, each with the reason."""
    m, par, off, hw = plan.method, plan.parallelism, plan.offload, plan.hardware
    out: dict[str, str] = {}

    def off_if(cond: bool, prefix: str, reason: str) -> None:
        if cond:
            out[prefix] = reason

    off_if(
        m.kind not in ("lora", "qlora"),
        "method.lora",
        f"LoRA settings apply to method.kind lora or qlora (now {m.kind})",
    )
    off_if(
        m.kind != "qlora",
        "method.qlora",
        f"QLoRA settings apply to method.kind qlora (now {m.kind})",
    )
    off_if(
        m.kind != "custom",
        "method.custom",
        f"custom trainable subset applies to method.kind custom (now {m.kind})",
    )
    off_if(
        m.optimizer.name != "custom",
        "method.optimizer.custom_bytes_per_param",
        f"applies to optimizer custom only (now {m.optimizer.name})",
    )
    off_if(
        m.recompute.policy != "every_k",
        "method.recompute.every_k",
        f"applies to recompute policy every_k only (now {m.recompute.policy})",
    )
    off_if(
        m.precision.compute_dtype != "fp16",
        "method.precision.loss_scaling",
        "loss scaling applies to fp16 compute only",
    )
    strategy = par.strategy
    off_if(
        not strategy.startswith("fsdp2"),
        "parallelism.knobs.fsdp_",
        f"FSDP2 knob; the strategy is {strategy}",
    )
    off_if(
        not strategy.startswith("fsdp1"),
        "parallelism.knobs.fsdp1_",
        f"FSDP1 knob; the strategy is {strategy}",
    )
    off_if(
        strategy not in _DS,
        "parallelism.knobs.ds_",
        f"DeepSpeed ZeRO knob; the strategy is {strategy}",
    )
    off_if(strategy != "ddp", "parallelism.knobs.ddp_", f"DDP knob; the strategy is {strategy}")
    off_if(
        strategy not in HYBRID_STRATEGIES,
        "parallelism.shard_group_size",
        f"applies to hybrid sharding (HSDP) only; the strategy is {strategy}",
    )
    off_if(par.pp == 1, "parallelism.pp_schedule", "applies when PP > 1")
    off_if(par.pp == 1, "parallelism.pp_layer_split", "applies when PP > 1")
    off_if(
        par.pp_schedule != "interleaved_1f1b" and par.virtual_stages == 1,
        "parallelism.virtual_stages",
        "applies to the interleaved_1f1b schedule only",
    )
    off_if(par.tp == 1, "parallelism.sequence_parallel", "applies when TP > 1")
    no_moe = plan.model.architecture.moe is None
    off_if(no_moe and par.ep == 1, "parallelism.ep", "needs a mixture-of-experts model")
    off_if(no_moe, "parallelism.expert_tp", "needs a mixture-of-experts model")
    off_if(
        strategy != "zero3" and off.params == "none",
        "offload.params",
        "parameter offload needs strategy zero3 (DeepSpeed offloads parameters only "
        "with ZeRO stage 3)",
    )
    off_if(off.params == "none", "offload.param_buffer_", "applies when parameters are offloaded")
    off_if(
        off.optimizer == "none",
        "offload.optimizer_buffer_count",
        "applies when optimizer state is offloaded",
    )
    nvme = "nvme" in (off.params, off.optimizer)
    off_if(not nvme, "offload.aio_", "applies when something is offloaded to NVMe")
    off_if(
        hw.usable_policy == "marketed",
        "hardware.usable_hbm_bytes",
        "the usable policy is marketed: the marketed HBM decides fit",
    )
    off_if(
        plan.checkpoint.format == "sharded",
        "checkpoint.staging",
        "applies to consolidated checkpoints only",
    )
    off_if(
        plan.runtime.loss != "chunked",
        "runtime.loss_chunk_tokens",
        "applies to the chunked loss only",
    )
    return out


def reason_for(path: str, reasons: dict[str, str]) -> str | None:
    """The reason ``path`` does not apply, if any prefix in ``reasons`` covers it."""
    for prefix, reason in reasons.items():
        if path == prefix or path.startswith(prefix if prefix.endswith("_") else prefix + "."):
            return reason
    return None
