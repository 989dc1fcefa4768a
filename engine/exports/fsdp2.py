"""FSDP2 settings as a torchtitan job config (TOML) from a plan.

Keys follow torchtitan's ``JobConfig`` (``[training]``, ``[parallelism]``,
``[activation_checkpoint]``). torchtitan's world is replicate × shard × CP × TP × PP
and EP is carved out of the data-parallel ranks, so its DP degrees multiply to the
plan's DP × EP.
"""

from __future__ import annotations

from typing import Any

from engine.exports.common import Export, global_batch, replicas
from engine.plan import Plan
from engine.stacks.defaults import resolved
from engine.stacks.families import rule_of

TITAN_SCHEDULE = {"1f1b": "1F1B", "interleaved_1f1b": "Interleaved1F1B", "gpipe": "GPipe"}
TITAN_DTYPE = {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32"}


def titan_config(plan: Plan) -> tuple[dict[str, dict[str, Any]], list[str]]:
    plan = resolved(plan)  # fields left to the training stack take its defaults
    par, b, prec = plan.parallelism, plan.batch, plan.method.precision
    notes: list[str] = []
    n = replicas(plan)
    if par.strategy == "fsdp2_hsdp":
        shard = par.shard_group_size or max(
            1, min(n, (par.ranks_per_node or plan.hardware.gpus_per_node) // (par.tp * par.cp))
        )
        replicate = n // shard
    elif rule_of(par.strategy).shards_nothing:
        shard, replicate = 1, n
    else:
        shard, replicate = n, 1
        if par.strategy != "fsdp2":
            notes.append(f"strategy {par.strategy} exported as FSDP2 full sharding")
    raf = par.knobs.fsdp_reshard_after_forward
    if isinstance(raf, bool):
        reshard = "always" if raf else "never"
    else:
        reshard = "always"
        notes.append(f"reshard_after_forward={raf} has no torchtitan key; set it in code")
    ac = plan.method.recompute.policy
    mode = {"none": "none", "selective": "selective", "full": "full"}.get(ac, "full")
    if ac not in ("none", "selective", "full"):
        notes.append(f"recompute policy {ac} exported as full")
    cfg: dict[str, dict[str, Any]] = {
        "training": {
            "local_batch_size": b.micro_batch,
            "global_batch_size": global_batch(plan),
            "seq_len": b.seq_len,
            "mixed_precision_param": TITAN_DTYPE[prec.compute_dtype],
            "mixed_precision_reduce": TITAN_DTYPE[prec.grad_dtype],
        },
        "parallelism": {
            "data_parallel_replicate_degree": replicate,
            "data_parallel_shard_degree": shard,
            "fsdp_reshard_after_forward": reshard,
            "tensor_parallel_degree": par.tp,
            "pipeline_parallel_degree": par.pp,
            "pipeline_parallel_schedule": TITAN_SCHEDULE[par.pp_schedule],
            "context_parallel_degree": par.cp,
            "expert_parallel_degree": par.ep,
            "expert_tensor_parallel_degree": par.expert_tp,
        },
        "activation_checkpoint": {"mode": mode},
    }
    return cfg, notes


def _toml_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int | float):
        return repr(v)
    return '"' + str(v).replace("\\", "\\\\").replace('"', '\\"') + '"'


def to_toml(cfg: dict[str, dict[str, Any]]) -> str:
    out = []
    for section, body in cfg.items():
        out.append(f"[{section}]")
        out.extend(f"{k} = {_toml_value(v)}" for k, v in body.items())
        out.append("")
    return "\n".join(out)


def export_fsdp2(plan: Plan) -> Export:
    cfg, notes = titan_config(plan)
    return Export("fsdp2", "torchtitan.toml", to_toml(cfg), tuple(notes))
