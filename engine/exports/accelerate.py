"""An accelerate config (the YAML ``accelerate config`` writes) from a plan.

Targets accelerate 1.15: keys are ``ClusterConfig``'s (``commands/config/config_args.py``)
and the ``accelerate launch`` options its ``deepspeed_config`` / ``fsdp_config`` /
``parallelism_config`` mappings are copied into (``commands/launch.py``). DeepSpeed
plans point ``deepspeed_config_file`` at the full ds_config written beside it (the
plugin keys alone cannot say buckets, precision or buffers); FSDP2 plans with HSDP, TP
or CP get ``parallelism_config`` (``dp_replicate_size`` × ``dp_shard_size`` × TP × CP =
the world). accelerate's FSDP2 takes only a boolean ``reshard_after_forward``
(``FullyShardedDataParallelPlugin.__post_init__`` refuses an int).
"""

from __future__ import annotations

from typing import Any

from engine.exports.common import (
    Export,
    Gaps,
    Snippet,
    comment_block,
    comment_lines,
    mixed_precision,
    ranks_per_node,
    shard_group,
)
from engine.exports.deepspeed import ds_config, export_deepspeed
from engine.exports.deepspeed import expressed as ds_expressed
from engine.exports.flat_yaml import to_yaml
from engine.plan import Plan, with_values
from engine.stacks.defaults import resolve_stack_defaults, resolved
from engine.stacks.families import rule_of

TARGET = "accelerate 1.15"
DS_FILE = "ds_config.json"

FSDP1_STRATEGY = {
    "fsdp1_full_shard": "FULL_SHARD",
    "fsdp1_shard_grad_op": "SHARD_GRAD_OP",
    "fsdp1_no_shard": "NO_SHARD",
    "fsdp1_hybrid_shard": "HYBRID_SHARD",
    "fsdp1_hybrid_shard_zero2": "HYBRID_SHARD_ZERO2",
}
PREFETCH = {"backward_pre": "BACKWARD_PRE", "backward_post": "BACKWARD_POST", "none": "NO_PREFETCH"}
STATE_DICT = {"sharded": "SHARDED_STATE_DICT", "consolidated_rank0": "FULL_STATE_DICT"}


def _deepspeed(plan: Plan, cfg: dict[str, Any], gaps: Gaps) -> None:
    cfg["distributed_type"] = "DEEPSPEED"
    ds: dict[str, Any] = {"deepspeed_config_file": DS_FILE}
    init = plan.host.model_init
    if rule_of(plan.parallelism.strategy).zero_stage == 3:
        ds["zero3_init_flag"] = init == "zero_init"
        if init == "meta":
            gaps.add("host.model_init", "under ZeRO-3 accelerate builds with zero.Init or in full")
    elif init != "full_copy_per_rank":
        gaps.add("host.model_init", "below ZeRO-3 every rank loads the full model")
    if cfg["num_machines"] > 1:
        ds["deepspeed_multinode_launcher"] = "standard"
    cfg["deepspeed_config"] = ds
    # accelerate adds bf16.enabled for mixed_precision bf16: autocast plans say 'no'
    ds_cfg, _ = ds_config(plan)
    cfg["mixed_precision"] = next((h for h in ("bf16", "fp16") if h in ds_cfg), "no")


def _fsdp_precision(plan: Plan, gaps: Gaps) -> None:
    prec = plan.method.precision
    want = "fp32" if prec.compute_dtype == "fp32" else "autocast"
    if plan.method.kind in ("lora", "qlora") and want != "fp32":
        # accelerate upcasts only the trainable parameters (peft's adapters, already
        # fp32): the base keeps the policy the HF Trainer stack gives it (the importer
        # leaves the policy to that default too)
        auto = {"method.precision.policy": "auto", "stack.name": "hf_trainer"}
        default = resolved(with_values(plan, auto))
        want = default.method.precision.policy
    if prec.policy != want:
        gaps.add(
            "method.precision.policy",
            f"accelerate's FSDP upcasts trainable parameters under mixed precision "
            f"({want}); {prec.policy} has no key",
        )
    if prec.grad_dtype != prec.compute_dtype:
        gaps.add(
            "method.precision.grad_dtype",
            "accelerate's MixedPrecisionPolicy reduces in the mixed-precision dtype",
        )


def _fsdp(plan: Plan, cfg: dict[str, Any], gaps: Gaps) -> None:
    par, off, knobs = plan.parallelism, plan.offload, plan.parallelism.knobs
    rule = rule_of(par.strategy)
    cfg["distributed_type"] = "FSDP"
    rc = plan.method.recompute.policy
    if rc not in ("none", "full"):
        gaps.add("method.recompute.policy", f"fsdp_activation_checkpointing is on/off, not {rc}")
    if off.params == "cpu" and off.optimizer != "cpu":
        gaps.add("offload.optimizer", "FSDP's CPU offload moves the optimizer state too")
    fmt = plan.checkpoint.format
    if fmt not in STATE_DICT:
        gaps.add("checkpoint.format", f"{fmt} has no fsdp_state_dict_type")
    if plan.host.model_init == "zero_init":
        gaps.add("host.model_init", "zero.Init is DeepSpeed's")
    f: dict[str, Any] = {
        "fsdp_version": 2 if rule.family == "fsdp2" else 1,
        "fsdp_auto_wrap_policy": "TRANSFORMER_BASED_WRAP",
        "fsdp_offload_params": off.params == "cpu",
        "fsdp_activation_checkpointing": rc == "full",
        "fsdp_state_dict_type": STATE_DICT.get(fmt, "SHARDED_STATE_DICT"),
        "fsdp_cpu_ram_efficient_loading": plan.host.model_init == "meta",
    }
    if knobs.fsdp_prefetch_units != 1:
        gaps.add("parallelism.knobs.fsdp_prefetch_units", "accelerate prefetches one unit")
    if rule.family == "fsdp2":
        raf = knobs.fsdp_reshard_after_forward
        f["fsdp_reshard_after_forward"] = raf if isinstance(raf, bool) else True
        if not isinstance(raf, bool):
            gaps.add(
                "parallelism.knobs.fsdp_reshard_after_forward",
                f"accelerate 1.15's FSDP2 plugin refuses an int ({raf}); written as true",
            )
        _parallelism_config(plan, cfg, gaps)
    else:
        f["fsdp_sharding_strategy"] = FSDP1_STRATEGY[par.strategy]
        f["fsdp_backward_prefetch"] = PREFETCH[knobs.fsdp1_backward_prefetch]
        f["fsdp_use_orig_params"] = True
        if not knobs.fsdp1_limit_all_gathers:
            gaps.add("parallelism.knobs.fsdp1_limit_all_gathers", "accelerate always limits")
        if rule.hybrid and par.shard_group_size not in (None, shard_group(plan)):
            gaps.add("parallelism.shard_group_size", "FSDP1 hybrid shards within one node")
        for name in ("tp", "cp"):
            if getattr(par, name) > 1:
                gaps.add(f"parallelism.{name}", "parallelism_config needs FSDP2")
    cfg["fsdp_config"] = f


def _parallelism_config(plan: Plan, cfg: dict[str, Any], gaps: Gaps) -> None:
    par = plan.parallelism
    shard = shard_group(plan) if rule_of(par.strategy).hybrid else par.dp
    replicate = par.dp // shard
    if rule_of(par.strategy).hybrid and replicate == 1:
        gaps.add("parallelism.strategy", "HSDP with one replica is plain FSDP2 in accelerate")
        gaps.add("parallelism.shard_group_size", "HSDP with one replica is plain FSDP2")
    if replicate > 1 or par.tp > 1 or par.cp > 1:
        cfg["parallelism_config"] = {
            "parallelism_config_dp_replicate_size": replicate,
            "parallelism_config_dp_shard_size": shard,
            "parallelism_config_tp_size": par.tp,
            "parallelism_config_cp_size": par.cp,
        }


def _gaps(plan: Plan, gaps: Gaps) -> None:
    par = plan.parallelism
    stack = resolve_stack_defaults(plan).stack
    if stack != "hf_trainer":
        gaps.add("stack.name", f"accelerate launches the HF Trainer / accelerate, not {stack}")
    rule = rule_of(par.strategy)
    prec = plan.method.precision
    if rule.family != "deepspeed" and prec.compute_dtype == "fp16" and not prec.loss_scaling:
        gaps.add("method.precision.loss_scaling", "accelerate's fp16 always scales the loss")
    for name in ("pp", "ep"):
        if getattr(par, name) > 1:
            gaps.add(f"parallelism.{name}", "accelerate has no pipeline or expert parallelism")
    if rule.family == "megatron":
        gaps.add(
            "parallelism.strategy", "Megatron's distributed optimizer: use the megatron export"
        )
    if rule.family in ("ddp", "megatron"):
        for name in ("tp", "cp"):
            if getattr(par, name) > 1:
                gaps.add(f"parallelism.{name}", "parallelism_config needs FSDP2")
        prec = plan.method.precision
        want = "fp32" if prec.compute_dtype == "fp32" else "pure_16bit"
        if prec.policy != want:
            gaps.add(
                "method.precision.policy",
                f"without FSDP the HF Trainer trains in the loaded dtype ({want} here)",
            )
        if prec.grad_dtype != prec.compute_dtype:
            gaps.add("method.precision.grad_dtype", "DDP reduces in the parameters' dtype")
        if par.knobs.ddp_bucket_cap_mb != 25.0:
            gaps.add(
                "parallelism.knobs.ddp_bucket_cap_mb", "set ddp_bucket_cap_mb in TrainingArguments"
            )


def accelerate_config(plan: Plan) -> tuple[dict[str, Any], Gaps]:
    plan = resolved(plan)  # fields left to the training stack take its defaults
    par = plan.parallelism
    gaps = Gaps()
    world = par.world_size
    cfg: dict[str, Any] = {
        "compute_environment": "LOCAL_MACHINE",
        "mixed_precision": mixed_precision(plan),
        "num_machines": -(-world // ranks_per_node(plan)),
        "num_processes": world,
        "machine_rank": 0,
        "main_training_function": "main",
        "rdzv_backend": "static",
        "same_network": True,
        "use_cpu": False,
    }
    _gaps(plan, gaps)
    rule = rule_of(par.strategy)
    if rule.family == "deepspeed":
        _deepspeed(plan, cfg, gaps)
    elif rule.fsdp:
        _fsdp_precision(plan, gaps)
        _fsdp(plan, cfg, gaps)
    else:
        cfg["distributed_type"] = "MULTI_GPU" if world > 1 else "NO"
    lost = [n for n in ("tp", "cp", "pp", "ep") if f"parallelism.{n}" in gaps.items]
    if lost:
        gaps.add("parallelism.dp", f"num_processes also counts the {'/'.join(lost)} ranks")
        gaps.add("parallelism.shard_group_size", "follows the DP size")
    return cfg, gaps


def expressed(plan: Plan) -> frozenset[str]:
    """The plan fields this plan's accelerate config (and its ds_config) carries."""
    p = resolved(plan)
    rule = rule_of(p.parallelism.strategy)
    out = {"stack.name", "parallelism.strategy", "parallelism.dp", "parallelism.tp"}
    out |= {"parallelism.cp", "parallelism.pp", "parallelism.ep"}
    if rule.family == "deepspeed":
        return frozenset(out | ds_expressed(p) | {"host.model_init"})
    out |= {"method.precision.policy", "method.precision.compute_dtype"}
    out |= {"method.precision.grad_dtype", "batch.global_batch", "method.precision.loss_scaling"}
    if rule.fsdp:
        out |= {"offload.params", "offload.optimizer", "method.recompute.policy"}
        out |= {"checkpoint.format", "host.model_init", "parallelism.shard_group_size"}
        if rule.family == "fsdp2":
            out.add("parallelism.knobs.fsdp_reshard_after_forward")
        else:
            out.add("parallelism.knobs.fsdp1_backward_prefetch")
    return frozenset(out)


def export_accelerate(plan: Plan) -> Export:
    cfg, gaps = accelerate_config(plan)
    b = plan.batch
    advice = [
        f"TrainingArguments: per_device_train_batch_size={b.micro_batch}, "
        f"gradient_accumulation_steps={b.grad_accum}, max length {b.seq_len}"
    ]
    extras: tuple[Snippet, ...] = ()
    if cfg["distributed_type"] == "DEEPSPEED":
        ds = export_deepspeed(plan)
        extras = (Snippet(DS_FILE, ds.text),)
        for u in ds.unexpressed:
            gaps.add(u.field, u.why)
        advice += list(ds.advice)
        advice = advice[1:]  # the ds_config carries the batch
    header = f"# accelerate config for {TARGET}, written by MemPlan\n"
    header += comment_block(gaps()) + comment_lines(advice)
    text = to_yaml(cfg, header)
    return Export(
        "accelerate", "accelerate_config.yaml", text, gaps(), TARGET, extras, tuple(advice)
    )
