"""DeepSpeed ``ds_config.json`` from a plan.

Keys follow DeepSpeed's config documentation (deepspeed.ai/docs/config-json) and its
config models (``deepspeed/runtime/zero/config.py``, ``offload_config.py``). Batch keys
are consistent by construction: train_batch_size = micro × accumulation × DP replicas.
"""

from __future__ import annotations

import json
from typing import Any

from engine.exports.common import Export, global_batch, mixed_precision
from engine.plan import Plan
from engine.stacks.defaults import resolved
from engine.stacks.families import rule_of


def ds_config(plan: Plan) -> tuple[dict[str, Any], list[str]]:
    """The config dict and notes on what the plan implies but the config cannot carry."""
    plan = resolved(plan)  # fields left to the training stack take its defaults
    par, b, knobs, off = plan.parallelism, plan.batch, plan.parallelism.knobs, plan.offload
    notes: list[str] = []
    rule = rule_of(par.strategy)
    stage = rule.zero_stage
    if rule.family not in ("ddp", "deepspeed"):
        notes.append(f"strategy {par.strategy} exported as the equivalent ZeRO stage {stage}")
    zero: dict[str, Any] = {
        "stage": stage,
        "reduce_bucket_size": knobs.ds_reduce_bucket_elements,
        "allgather_bucket_size": knobs.ds_allgather_bucket_elements,
        "overlap_comm": knobs.ds_overlap_comm if knobs.ds_overlap_comm is not None else stage == 3,
        "contiguous_gradients": True,
    }
    if stage == 3:
        zero.update(
            {
                "stage3_prefetch_bucket_size": knobs.ds_prefetch_bucket_elements,
                "stage3_max_live_parameters": knobs.ds_max_live_parameters,
                "stage3_max_reuse_distance": knobs.ds_max_reuse_distance,
                "stage3_param_persistence_threshold": knobs.ds_param_persistence_threshold,
                "sub_group_size": off.sub_group_size,
            }
        )
    if off.optimizer != "none":
        zero["offload_optimizer"] = {
            "device": off.optimizer,
            "pin_memory": off.pin_memory,
            "buffer_count": off.optimizer_buffer_count,
        }
    if off.params != "none":
        zero["offload_param"] = {
            "device": off.params,
            "pin_memory": off.pin_memory,
            "buffer_count": off.param_buffer_count,
            "buffer_size": off.param_buffer_elements,
        }
    if "nvme" in (off.optimizer, off.params):
        notes.append("set nvme_path in the offload sections to your NVMe mount")
    mp = mixed_precision(plan)
    cfg: dict[str, Any] = {
        "train_batch_size": global_batch(plan),
        "train_micro_batch_size_per_gpu": b.micro_batch,
        "gradient_accumulation_steps": b.grad_accum,
        "bf16": {"enabled": mp == "bf16"},
        "fp16": {"enabled": mp == "fp16"},
        "zero_optimization": zero,
    }
    if "nvme" in (off.optimizer, off.params):
        cfg["aio"] = {"block_size": off.aio_block_size, "queue_depth": off.aio_queue_depth}
    if par.tp > 1 or par.pp > 1 or par.cp > 1 or par.ep > 1:
        notes.append(
            f"TP {par.tp} / PP {par.pp} / CP {par.cp} / EP {par.ep} are set by the training "
            f"script (e.g. Megatron-DeepSpeed), not ds_config; DP replicas = "
            f"{par.dp * par.ep}"
        )
    notes.append("optimizer and scheduler are left to the training script")
    return cfg, notes


def export_deepspeed(plan: Plan) -> Export:
    cfg, notes = ds_config(plan)
    return Export("deepspeed", "ds_config.json", json.dumps(cfg, indent=2) + "\n", tuple(notes))
