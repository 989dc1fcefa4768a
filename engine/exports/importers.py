"""Prefill a plan from a DeepSpeed ds_config.json or an accelerate config.

Only the fields a config really states are taken; ``"auto"`` values (filled in by the
HF Trainer at run time) and keys MemPlan does not model are reported, not guessed.
"""

from __future__ import annotations

import json
from typing import Any

from engine.exports.common import STAGE_STRATEGY
from engine.plan import Plan, with_values


def _int(v: Any) -> int | None:
    if isinstance(v, bool) or v == "auto" or v is None:
        return None
    return int(float(v))


def deepspeed_changes(cfg: dict[str, Any], plan: Plan) -> tuple[dict[str, Any], list[str]]:
    """Field-path changes a ds_config implies for ``plan``, and notes."""
    ch: dict[str, Any] = {"stack.name": "deepspeed"}
    notes: list[str] = []
    for key in (
        "train_micro_batch_size_per_gpu",
        "gradient_accumulation_steps",
        "train_batch_size",
    ):
        if cfg.get(key) == "auto":
            notes.append(f"{key} is 'auto' (set by the trainer); the plan's value is kept")
    mb = _int(cfg.get("train_micro_batch_size_per_gpu")) or plan.batch.micro_batch
    ga = _int(cfg.get("gradient_accumulation_steps")) or plan.batch.grad_accum
    ch["batch.micro_batch"], ch["batch.grad_accum"] = mb, ga
    tbs = _int(cfg.get("train_batch_size"))
    if tbs is not None:
        ep = plan.parallelism.ep
        if tbs % (mb * ga * ep):
            notes.append(f"train_batch_size {tbs} is not a multiple of micro × accumulation")
        else:
            ch["parallelism.dp"] = tbs // (mb * ga * ep)
            ch["parallelism.shard_group_size"] = None
            ch["batch.global_batch"] = None
    for name in ("bf16", "fp16"):
        if isinstance(cfg.get(name), dict) and cfg[name].get("enabled") is True:
            ch["method.precision.policy"] = "amp_master"
            ch["method.precision.compute_dtype"] = name
            ch["method.precision.grad_dtype"] = name
    z = cfg.get("zero_optimization") or {}
    stage = _int(z.get("stage"))
    if stage is not None:
        ch["parallelism.strategy"] = STAGE_STRATEGY[stage]
    knob = {
        "reduce_bucket_size": "ds_reduce_bucket_elements",
        "allgather_bucket_size": "ds_allgather_bucket_elements",
        "stage3_prefetch_bucket_size": "ds_prefetch_bucket_elements",
        "stage3_max_live_parameters": "ds_max_live_parameters",
        "stage3_max_reuse_distance": "ds_max_reuse_distance",
        "stage3_param_persistence_threshold": "ds_param_persistence_threshold",
    }
    for key, field in knob.items():
        if z.get(key) == "auto":
            notes.append(f"zero_optimization.{key} is 'auto'; the default is kept")
        elif key in z:
            ch[f"parallelism.knobs.{field}"] = _int(z[key])
    if isinstance(z.get("overlap_comm"), bool):
        ch["parallelism.knobs.ds_overlap_comm"] = z["overlap_comm"]
    if "sub_group_size" in z and _int(z["sub_group_size"]):
        ch["offload.sub_group_size"] = _int(z["sub_group_size"])
    for sect, field in (("offload_optimizer", "optimizer"), ("offload_param", "params")):
        o = z.get(sect)
        if isinstance(o, dict):
            ch[f"offload.{field}"] = o.get("device", "none")
            if "pin_memory" in o:
                ch["offload.pin_memory"] = bool(o["pin_memory"])
            if "buffer_count" in o:
                prefix = "optimizer" if field == "optimizer" else "param"
                ch[f"offload.{prefix}_buffer_count"] = _int(o["buffer_count"])
            if field == "params" and "buffer_size" in o:
                ch["offload.param_buffer_elements"] = _int(o["buffer_size"])
    return ch, notes


def import_deepspeed(text: str, plan: Plan) -> tuple[Plan, list[str]]:
    """A plan prefilled from ds_config.json text (raises ValueError on bad JSON)."""
    cfg = json.loads(text)
    if not isinstance(cfg, dict):
        raise ValueError("a ds_config must be a JSON object")
    ch, notes = deepspeed_changes(cfg, plan)
    return with_values(plan, ch), notes


def read_flat_yaml(text: str) -> dict[str, Any]:
    """The two-level YAML subset accelerate writes: ``key: scalar`` and one nesting."""
    out: dict[str, Any] = {}
    current: dict[str, Any] | None = None
    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.split(" #")[0].rstrip()
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        indented = line.startswith((" ", "\t"))
        key, sep, val = line.strip().partition(":")
        if not sep:
            raise ValueError(f"line {n}: expected 'key: value'")
        val = val.strip()
        if indented:
            if current is None:
                raise ValueError(f"line {n}: indented key outside a mapping")
            current[key] = _scalar(val)
        elif val == "":
            current = out.setdefault(key, {})
        else:
            current = None
            out[key] = _scalar(val)
    return out


def _scalar(v: str) -> Any:
    if len(v) >= 2 and v[0] == v[-1] and v[0] in "'\"":
        return v[1:-1].replace("''", "'") if v[0] == "'" else v[1:-1]
    low = v.lower()
    if low in ("true", "false"):
        return low == "true"
    if low in ("null", "~", ""):
        return None
    if v == "{}":
        return {}
    try:
        return int(v)
    except ValueError:
        try:
            return float(v)
        except ValueError:
            return v


def accelerate_changes(cfg: dict[str, Any], plan: Plan) -> tuple[dict[str, Any], list[str]]:
    ch: dict[str, Any] = {}
    notes: list[str] = []
    mp = cfg.get("mixed_precision")
    if mp in ("bf16", "fp16"):
        ch["method.precision.compute_dtype"] = mp
    dt = cfg.get("distributed_type")
    n = _int(cfg.get("num_processes"))
    if n is not None and n > 0:
        par = plan.parallelism
        mpar = par.tp * par.pp * par.cp * par.ep
        if n % mpar:
            notes.append(f"num_processes {n} is not a multiple of TP×PP×CP×EP {mpar}")
        else:
            ch["parallelism.dp"] = n // mpar
            ch["parallelism.shard_group_size"] = None
            ch["batch.global_batch"] = None
    if dt == "DEEPSPEED":
        ds = cfg.get("deepspeed_config") or {}
        if "deepspeed_config_file" in ds:
            notes.append("deepspeed_config_file: import that ds_config.json as well")
        stage = _int(ds.get("zero_stage"))
        if stage is not None:
            ch["parallelism.strategy"] = STAGE_STRATEGY[stage]
        ga = _int(ds.get("gradient_accumulation_steps"))
        if ga:
            ch["batch.grad_accum"] = ga
        for key, field in (
            ("offload_optimizer_device", "optimizer"),
            ("offload_param_device", "params"),
        ):
            if ds.get(key) in ("none", "cpu", "nvme"):
                ch[f"offload.{field}"] = ds[key]
    elif dt == "FSDP":
        f = cfg.get("fsdp_config") or {}
        if _int(f.get("fsdp_version")) == 2:
            ch["parallelism.strategy"] = "fsdp2"
            if isinstance(f.get("fsdp_reshard_after_forward"), bool):
                ch["parallelism.knobs.fsdp_reshard_after_forward"] = f["fsdp_reshard_after_forward"]
        else:
            inv = {
                "FULL_SHARD": "fsdp1_full_shard",
                "SHARD_GRAD_OP": "fsdp1_shard_grad_op",
                "NO_SHARD": "fsdp1_no_shard",
                "HYBRID_SHARD": "fsdp1_hybrid_shard",
                "HYBRID_SHARD_ZERO2": "fsdp1_hybrid_shard_zero2",
            }
            s = str(f.get("fsdp_sharding_strategy", "FULL_SHARD"))
            ch["parallelism.strategy"] = inv.get(s, "fsdp1_full_shard")
        if f.get("fsdp_activation_checkpointing") is True:
            ch["method.recompute.policy"] = "full"
        if f.get("fsdp_offload_params") is True:
            notes.append(
                "fsdp_offload_params: FSDP CPU offload moves params, grads and "
                "optimizer state; set as optimizer offload to CPU"
            )
            ch["offload.optimizer"] = "cpu"
    elif dt in ("MULTI_GPU", "NO"):
        ch["parallelism.strategy"] = "ddp"
    return ch, notes


def import_accelerate(text: str, plan: Plan) -> tuple[Plan, list[str]]:
    """A plan prefilled from an accelerate config (YAML, or JSON if it starts with '{')."""
    cfg = json.loads(text) if text.lstrip().startswith("{") else read_flat_yaml(text)
    ch, notes = accelerate_changes(cfg, plan)
    return with_values(plan, ch), notes
