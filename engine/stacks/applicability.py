"""Which inputs have no effect on a plan, and why: shown as a tooltip on the disabled
field in the window, and as a note when ``memplan … --set`` sets one.

Fields that do not apply are disabled, never hidden: an analyst comparing two plans
should see the same form, with the reason a knob has no effect right beside it. Strategy
knobs follow the strategy table (:mod:`engine.stacks.families`): a knob applies to the
strategies that read it, so FSDP1 NO_SHARD — which all-reduces each unit's gradient in
place and gathers nothing — reads neither DDP's bucket knob nor an FSDP1 gather knob.
"""

from __future__ import annotations

from dataclasses import dataclass

from engine.plan import Plan
from engine.stacks.defaults import resolved
from engine.stacks.families import FAMILIES, rule_of


@dataclass(frozen=True, slots=True)
class NoEffect:
    """A field (or every field under a prefix) that has no effect on the plan.

    ``prefix`` is a field path, or a path prefix ending in ``_`` that covers every knob
    sharing it; ``under`` names the setting that makes it idle (``fsdp2``,
    ``method.kind full``); ``reason`` says why, in words a user can act on.
    """

    prefix: str
    under: str
    reason: str

    def covers(self, path: str) -> bool:
        if path == self.prefix:
            return True
        return path.startswith(self.prefix if self.prefix.endswith("_") else self.prefix + ".")


def no_effect(plan: Plan) -> tuple[NoEffect, ...]:
    """Every field prefix that has no effect on this plan, with what idles it and why
    (judged on the plan as computed: fields left to the stack take its defaults)."""
    plan = resolved(plan)
    m, par, off, hw = plan.method, plan.parallelism, plan.offload, plan.hardware
    out: list[NoEffect] = []

    def off_if(cond: bool, prefix: str, under: str, reason: str) -> None:
        if cond:
            out.append(NoEffect(prefix, under, reason))

    kind = f"method.kind {m.kind}"
    off_if(
        m.kind not in ("lora", "qlora"),
        "method.lora",
        kind,
        f"LoRA settings apply to method.kind lora or qlora (now {m.kind})",
    )
    off_if(
        m.kind != "qlora",
        "method.qlora",
        kind,
        f"QLoRA settings apply to method.kind qlora (now {m.kind})",
    )
    master = m.precision.policy == "amp_master"
    off_if(
        master and m.kind in ("lora", "qlora"),
        "method.lora.adapter_dtype",
        "precision amp_master",
        "a master-weights engine (DeepSpeed bf16.enabled) casts the adapters to the working "
        "dtype and keeps their fp32 master in the optimizer",
    )
    off_if(
        master and m.kind == "qlora",
        "method.qlora.upcast_non_quantized",
        "precision amp_master",
        "a master-weights engine (DeepSpeed bf16.enabled) casts peft's fp32 upcasts back "
        "to the working dtype",
    )
    torchao = m.kind == "qlora" and m.qlora.nf4_impl == "torchao"
    for field in ("method.qlora.double_quant", "method.qlora.quant_storage"):
        off_if(torchao, field, "method.qlora.nf4_impl torchao",
               "bitsandbytes settings: torchao's NF4Tensor always double-quantizes and "
               "keeps its data as uint8")  # fmt: skip
    off_if(
        m.kind != "custom",
        "method.custom",
        kind,
        f"custom trainable subset applies to method.kind custom (now {m.kind})",
    )
    off_if(
        m.optimizer.name != "custom",
        "method.optimizer.custom_bytes_per_param",
        f"optimizer {m.optimizer.name}",
        f"applies to optimizer custom only (now {m.optimizer.name})",
    )
    off_if(
        m.recompute.policy != "every_k",
        "method.recompute.every_k",
        f"recompute policy {m.recompute.policy}",
        f"applies to recompute policy every_k only (now {m.recompute.policy})",
    )
    off_if(
        rule_of(par.strategy).family != "megatron",
        "method.optimizer.precision_aware",
        par.strategy,
        "applies to Megatron-Core's distributed optimizer only",
    )
    off_if(
        m.precision.compute_dtype != "fp16",
        "method.precision.loss_scaling",
        f"compute dtype {m.precision.compute_dtype}",
        "loss scaling applies to fp16 compute only",
    )
    out.extend(_strategy_knobs(plan))
    strategy = par.strategy
    off_if(
        not rule_of(strategy).hybrid,
        "parallelism.shard_group_size",
        strategy,
        f"applies to hybrid sharding (HSDP) only; the strategy is {strategy}",
    )
    off_if(par.pp == 1, "parallelism.pp_schedule", "pp 1", "applies when PP > 1")
    off_if(par.pp == 1, "parallelism.pp_layer_split", "pp 1", "applies when PP > 1")
    off_if(par.pp == 1, "parallelism.pp_layout", "pp 1", "applies when PP > 1")
    off_if(par.pp == 1, "parallelism.pp_split_policy", "pp 1", "applies when PP > 1")
    off_if(par.cp == 1, "parallelism.cp_comm", "cp 1", "applies when CP > 1")
    off_if(
        par.pp_schedule != "interleaved_1f1b" and par.virtual_stages == 1,
        "parallelism.virtual_stages",
        f"pp_schedule {par.pp_schedule}",
        "applies to the interleaved_1f1b schedule only",
    )
    off_if(par.tp == 1, "parallelism.sequence_parallel", "tp 1", "applies when TP > 1")
    off_if(par.tp == 1, "parallelism.tp_style", "tp 1", "applies when TP > 1")
    no_moe = plan.model.architecture.moe is None
    off_if(
        no_moe and par.ep == 1,
        "parallelism.ep",
        "a dense model",
        "needs a mixture-of-experts model",
    )
    off_if(no_moe, "parallelism.expert_tp", "a dense model", "needs a mixture-of-experts model")
    off_if(
        strategy != "zero3" and off.params == "none",
        "offload.params",
        strategy,
        "parameter offload needs strategy zero3 (DeepSpeed offloads parameters only "
        "with ZeRO stage 3)",
    )
    off_if(
        off.params == "none",
        "offload.param_buffer_",
        "offload.params none",
        "applies when parameters are offloaded",
    )
    off_if(
        off.optimizer == "none",
        "offload.optimizer_buffer_count",
        "offload.optimizer none",
        "applies when optimizer state is offloaded",
    )
    nvme = "nvme" in (off.params, off.optimizer)
    off_if(
        not nvme, "offload.aio_", "no NVMe offload", "applies when something is offloaded to NVMe"
    )
    off_if(
        hw.usable_policy == "marketed",
        "hardware.usable_hbm_bytes",
        "usable_policy marketed",
        "the usable policy is marketed: the marketed HBM decides fit",
    )
    off_if(
        plan.checkpoint.format == "sharded"
        and not (par.strategy.startswith("fsdp1_") and par.strategy != "fsdp1_no_shard"),
        "checkpoint.staging",
        "checkpoint.format sharded",
        "applies to consolidated checkpoints, and to FSDP1's sharded state dict (its "
        "shard clones: gpu without ShardedStateDictConfig offload_to_cpu)",
    )
    rt = plan.runtime
    off_if(
        rt.loss_impl != "chunked" or rt.activation_profile == "torchtitan",
        "runtime.loss_chunk_tokens",
        f"runtime.loss_impl {rt.loss_impl}",
        "applies to the chunked loss only (torchtitan's always runs 8 chunks)",
    )
    off_if(
        not rt.attention.startswith("sdpa"),
        "runtime.kv_expanded",
        f"runtime.attention {rt.attention}",
        "K/V copies matter to an SDPA call only (eager keeps them anyway, flash-attn "
        "takes grouped heads)",
    )
    fraction = rt.reserve_model == "fraction"
    for name in ("fragmentation", "side_stream_cache"):
        off_if(fraction, f"runtime.{name}", "runtime.reserve_model fraction",
               "read by the allocator reserve model only (the fraction model takes "
               "runtime.allocator_reserve)")  # fmt: skip
    off_if(not fraction, "runtime.allocator_reserve", "runtime.reserve_model allocator",
           "read by the fraction reserve model only")  # fmt: skip
    out += _knob_fields(plan)
    return tuple(out)


def _knob_fields(plan: Plan) -> list[NoEffect]:
    """Float8, recompute modules, bitsandbytes and paged-state fields where nothing reads
    them (issue 35 items 11-12)."""
    m, out = plan.method, []
    if m.precision.float8 == "none" or rule_of(plan.parallelism.strategy).family != "fsdp2":
        out.append(
            NoEffect(
                "method.precision.float8_all_gather",
                f"method.precision.float8 {m.precision.float8}",
                "fp8 all-gather applies to Float8 training under FSDP2",
            )
        )
    if m.recompute.policy != "selective" or plan.runtime.activation_profile != "megatron":
        out.append(
            NoEffect(
                "method.recompute.modules",
                f"method.recompute.policy {m.recompute.policy}",
                "recompute modules apply to Megatron-Core's selective recompute (the "
                "megatron activation profile)",
            )
        )
    if m.kind != "qlora" or m.qlora.nf4_impl == "torchao":
        out.append(
            NoEffect(
                "runtime.bitsandbytes_version",
                f"method.kind {m.kind}" if m.kind != "qlora" else "method.qlora.nf4_impl torchao",
                "the bitsandbytes version changes QLoRA's bitsandbytes 4-bit linears only",
            )
        )
    if plan.runtime.activation_profile != "hf-transformers":
        out.append(
            NoEffect(
                "runtime.transformers_version",
                f"runtime.activation_profile {plan.runtime.activation_profile}",
                "the transformers version changes the hf-transformers loss only",
            )
        )
    if plan.runtime.activation_profile != "torchtitan":
        out.append(
            NoEffect(
                "runtime.torchtitan_version",
                f"runtime.activation_profile {plan.runtime.activation_profile}",
                "the torchtitan version changes torchtitan's FSDP2 units only",
            )
        )
    if m.optimizer.name != "adam8bit":
        out.append(
            NoEffect(
                "method.optimizer.adam8bit_library",
                f"method.optimizer.name {m.optimizer.name}",
                "whose 8-bit AdamW applies to optimizer adam8bit only",
            )
        )
    if m.optimizer.name not in ("adamw", "adam8bit"):
        out.append(
            NoEffect(
                "method.optimizer.paged",
                f"method.optimizer.name {m.optimizer.name}",
                "bitsandbytes pages AdamW state (paged_adamw_8bit / paged_adamw_32bit)",
            )
        )
    return out


def _strategy_knobs(plan: Plan) -> list[NoEffect]:
    """Each family's ``parallelism.knobs`` prefix that the plan's strategy does not read."""
    strategy = plan.parallelism.strategy
    rule = rule_of(strategy)
    out = []
    for family, info in FAMILIES.items():
        if info.knob_prefix is None or info.knob_prefix in rule.knobs:
            continue
        reason = (
            f"{info.label} knob; the strategy is {strategy}"
            if family != rule.family
            else f"{info.label} knob; {rule.label} does not read it"
        )
        out.append(NoEffect(f"parallelism.knobs.{info.knob_prefix}", strategy, reason))
    return out


def inapplicable(plan: Plan) -> dict[str, str]:
    """Field-path prefixes that have no effect on this plan, each with the reason."""
    return {e.prefix: e.reason for e in no_effect(plan)}


def reason_for(path: str, reasons: dict[str, str]) -> str | None:
    """The reason ``path`` does not apply, if any prefix in ``reasons`` covers it."""
    for prefix, reason in reasons.items():
        if NoEffect(prefix, "", reason).covers(path):
            return reason
    return None


def set_notes(plan: Plan, paths: list[str]) -> list[str]:
    """One line per path that has no effect on ``plan`` (for ``--set`` on the CLI)."""
    entries = no_effect(plan)
    notes = []
    for path in paths:
        hit = next((e for e in entries if e.covers(path)), None)
        if hit is not None:
            notes.append(f"--set {path} has no effect under {hit.under}: {hit.reason}")
    return notes
