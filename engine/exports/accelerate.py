"""An accelerate config (the YAML ``accelerate config`` writes) from a plan.

Keys follow accelerate's ``ClusterConfig`` (``commands/config/config_args.py``) and
its DeepSpeed / FSDP plugin options. The YAML is the flat two-level subset accelerate
itself writes, emitted here without a YAML dependency.
"""

from __future__ import annotations

from typing import Any

from engine.exports.common import Export, mixed_precision
from engine.plan import Plan
from engine.stacks.defaults import resolved
from engine.stacks.families import rule_of

FSDP1_STRATEGY = {
    "fsdp1_full_shard": "FULL_SHARD",
    "fsdp1_shard_grad_op": "SHARD_GRAD_OP",
    "fsdp1_no_shard": "NO_SHARD",
    "fsdp1_hybrid_shard": "HYBRID_SHARD",
    "fsdp1_hybrid_shard_zero2": "HYBRID_SHARD_ZERO2",
}


def accelerate_config(plan: Plan) -> tuple[dict[str, Any], list[str]]:
    plan = resolved(plan)  # fields left to the training stack take its defaults
    par, off = plan.parallelism, plan.offload
    notes: list[str] = []
    world = par.world_size
    g = plan.hardware.gpus_per_node
    cfg: dict[str, Any] = {
        "compute_environment": "LOCAL_MACHINE",
        "mixed_precision": mixed_precision(plan),
        "num_machines": -(-world // g),
        "num_processes": world,
        "machine_rank": 0,
        "main_training_function": "main",
        "rdzv_backend": "static",
        "same_network": True,
        "use_cpu": False,
    }
    rule = rule_of(par.strategy)
    if rule.family == "deepspeed":
        cfg["distributed_type"] = "DEEPSPEED"
        ds: dict[str, Any] = {
            "zero_stage": rule.zero_stage,
            "gradient_accumulation_steps": plan.batch.grad_accum,
            "offload_optimizer_device": off.optimizer,
            "offload_param_device": off.params,
            "zero3_init_flag": par.strategy == "zero3",
        }
        if cfg["num_machines"] > 1:
            ds["deepspeed_multinode_launcher"] = "standard"
        cfg["deepspeed_config"] = ds
    elif rule.fsdp:
        cfg["distributed_type"] = "FSDP"
        fsdp: dict[str, Any] = {
            "fsdp_version": 2 if rule.family == "fsdp2" else 1,
            "fsdp_auto_wrap_policy": "TRANSFORMER_BASED_WRAP",
            "fsdp_offload_params": off.params != "none" or off.optimizer != "none",
            "fsdp_activation_checkpointing": plan.method.recompute.policy == "full",
            "fsdp_state_dict_type": "SHARDED_STATE_DICT"
            if plan.checkpoint.format == "sharded"
            else "FULL_STATE_DICT",
            "fsdp_cpu_ram_efficient_loading": True,
        }
        if rule.family == "fsdp2":
            raf = par.knobs.fsdp_reshard_after_forward
            fsdp["fsdp_reshard_after_forward"] = raf if isinstance(raf, bool) else True
            if rule.hybrid:
                notes.append("HSDP needs accelerate's parallelism_config (dp_replicate, dp_shard)")
        else:
            fsdp["fsdp_sharding_strategy"] = FSDP1_STRATEGY[par.strategy]
            fsdp["fsdp_backward_prefetch"] = par.knobs.fsdp1_backward_prefetch.upper()
        cfg["fsdp_config"] = fsdp
    else:
        cfg["distributed_type"] = "MULTI_GPU" if world > 1 else "NO"
        if rule.family == "megatron":
            notes.append("Megatron's distributed optimizer: use the megatron export")
    if par.tp > 1 or par.pp > 1 or par.cp > 1 or par.ep > 1:
        notes.append("TP/PP/CP/EP are not expressed in this accelerate config")
    return cfg, notes


def _yaml_scalar(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int | float):
        return repr(v)
    s = str(v)
    plain = (
        s
        and s.replace("_", "").replace("-", "").isalnum()
        and s.lower() not in ("true", "false", "yes", "no", "on", "off", "null", "none", "~")
        and not s[0].isdigit()
    )
    return s if plain else "'" + s.replace("'", "''") + "'"


def to_yaml(cfg: dict[str, Any]) -> str:
    """Two-level YAML: top-level scalars and mappings of scalars, keys sorted."""
    out = []
    for k in sorted(cfg):
        v = cfg[k]
        if isinstance(v, dict):
            out.append(f"{k}:")
            out.extend(f"  {kk}: {_yaml_scalar(v[kk])}" for kk in sorted(v))
        else:
            out.append(f"{k}: {_yaml_scalar(v)}")
    return "\n".join(out) + "\n"


def export_accelerate(plan: Plan) -> Export:
    cfg, notes = accelerate_config(plan)
    return Export("accelerate", "accelerate_config.yaml", to_yaml(cfg), tuple(notes))
