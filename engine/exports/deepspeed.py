"""DeepSpeed ``ds_config.json`` from a plan: the whole job DeepSpeed runs.

Targets DeepSpeed 0.19 (keys checked against 0.19.6: ``runtime/config.py``,
``zero/config.py``, ``zero/offload_config.py``, ``precision_config.py``,
``activation_checkpointing/config.py``). The precision block follows the plan's
policy as DeepSpeed's code runs it: ``bf16.enabled`` casts the module to bf16 and keeps
an fp32 master (amp_master); ``bf16_master_weights_and_grads`` + ``bf16_optimizer_states``
keep everything bf16 (pure_16bit); ``torch_autocast`` keeps fp32 parameters and autocasts
(autocast); none of them is fp32. Batch keys are consistent by construction:
train_batch_size = micro × accumulation × DP replicas. JSON has no comments, so what the
file cannot say is listed by the caller (stderr, the window).
"""

from __future__ import annotations

import json
from typing import Any

from engine.exports.common import (
    NVME_PATH,
    TORCH_DTYPE,
    Export,
    Gaps,
    Unexpressed,
)
from engine.plan import Plan
from engine.stacks.defaults import resolve_stack_defaults, resolved
from engine.stacks.families import rule_of
from engine.workload import global_batch

TARGET = "DeepSpeed 0.19 (keys checked against 0.19.6)"

DS_OPTIMIZER = {"adamw": "AdamW", "lion": "Lion"}
"""Optimizers DeepSpeed builds from the config (``_configure_basic_optimizer``): Adam/
AdamW run FusedAdam (DeepSpeedCPUAdam when the optimizer is offloaded), Lion FusedLion."""


def _precision(plan: Plan, gaps: Gaps) -> dict[str, Any]:
    prec = plan.method.precision
    c, g, policy = prec.compute_dtype, prec.grad_dtype, prec.policy
    out: dict[str, Any] = {}
    half = c if c in ("bf16", "fp16") else None
    if policy == "amp_master" and half:
        out[half] = {"enabled": True}
        if g != half:
            out["data_types"] = {"grad_accum_dtype": g}
        if prec.optimizer_state_dtype != "fp32":
            gaps.add(
                "method.precision.optimizer_state_dtype",
                "DeepSpeed keeps 16-bit optimizer states only without an fp32 master "
                "(bf16_optimizer_states needs bf16_master_weights_and_grads)",
            )
    elif policy == "pure_16bit" and half == "bf16":
        out["bf16"] = {
            "enabled": True,
            "bf16_master_weights_and_grads": True,
            "bf16_optimizer_states": True,
        }
        if g != half:
            out["communication_data_type"] = g
    elif policy == "autocast" and half:
        out["torch_autocast"] = {"enabled": True, "dtype": TORCH_DTYPE[half]}
        if g != "fp32":
            out["communication_data_type"] = g
    elif policy == "fp32":
        if g != "fp32":
            out["communication_data_type"] = g
    else:
        why = f"{policy} with {c} has no DeepSpeed precision mode"
        for name in ("policy", "compute_dtype", "grad_dtype"):
            gaps.add(f"method.precision.{name}", why)
    if half == "fp16" and "fp16" in out:
        out["fp16"]["loss_scale"] = 0 if prec.loss_scaling else 1
    elif prec.loss_scaling:
        gaps.add("method.precision.loss_scaling", "DeepSpeed scales the loss only in fp16 mode")
    return out


def _zero(plan: Plan) -> dict[str, Any]:
    par, knobs, off = plan.parallelism, plan.parallelism.knobs, plan.offload
    stage = rule_of(par.strategy).zero_stage
    zero: dict[str, Any] = {
        "stage": stage,
        "reduce_bucket_size": knobs.ds_reduce_bucket_elements,
        "allgather_bucket_size": knobs.ds_allgather_bucket_elements,
        "overlap_comm": bool(knobs.ds_overlap_comm),
        "contiguous_gradients": True,
        "sub_group_size": off.sub_group_size,
    }
    if stage == 3:
        zero.update(
            {
                "stage3_prefetch_bucket_size": knobs.ds_prefetch_bucket_elements,
                "stage3_max_live_parameters": knobs.ds_max_live_parameters,
                "stage3_max_reuse_distance": knobs.ds_max_reuse_distance,
                "stage3_param_persistence_threshold": knobs.ds_param_persistence_threshold,
            }
        )
    if off.optimizer != "none":
        o: dict[str, Any] = {
            "device": off.optimizer,
            "pin_memory": off.pin_memory,
            "buffer_count": off.optimizer_buffer_count,
        }
        if off.optimizer == "nvme":
            o["nvme_path"] = NVME_PATH
        zero["offload_optimizer"] = o
    if off.params != "none":
        p: dict[str, Any] = {
            "device": off.params,
            "pin_memory": off.pin_memory,
            "buffer_count": off.param_buffer_count,
            "buffer_size": off.param_buffer_elements,
        }
        if off.params == "nvme":
            p["nvme_path"] = NVME_PATH
        zero["offload_param"] = p
    return zero


LR_PLACEHOLDER = 1e-5
"""The learning rate written for a plain DeepSpeed job (MemPlan plans hold none)."""


def _hyperparameters(plan: Plan, kind: str) -> dict[str, Any]:
    """``optimizer.params``: the HF Trainer fills only the keys written ``"auto"`` from
    its TrainingArguments (``integrations/deepspeed.py`` ``trainer_config_process``) and
    DeepSpeed takes its own defaults (lr 1e-3) for missing ones, so every key is
    written — ``"auto"`` under the HF Trainer, torch's AdamW / Lion defaults and a
    placeholder learning rate for a plain DeepSpeed script."""
    keys = ["lr", "betas", "weight_decay"] + (["eps"] if kind != "Lion" else [])
    if resolve_stack_defaults(plan).stack == "hf_trainer":
        return dict.fromkeys(keys, "auto")
    betas = [0.9, 0.99] if kind == "Lion" else [0.9, 0.999]
    out: dict[str, Any] = {"lr": LR_PLACEHOLDER, "betas": betas, "weight_decay": 0.0}
    if kind != "Lion":
        out["eps"] = 1e-8
    return out


def _optimizer(plan: Plan, gaps: Gaps) -> dict[str, Any] | None:
    opt = plan.method.optimizer
    kind = DS_OPTIMIZER.get(opt.name)
    if kind is None:
        gaps.add("method.optimizer.name", f"{opt.name} is not an optimizer DeepSpeed builds")
        return None
    params = _hyperparameters(plan, kind)
    if opt.implementation == "foreach" and opt.name == "adamw":
        params["torch_adam"] = True  # torch.optim.AdamW (foreach on CUDA)
    elif opt.implementation != "fused":
        gaps.add(
            "method.optimizer.implementation",
            f"DeepSpeed's {kind} is fused (FusedAdam / DeepSpeedCPUAdam); "
            f"{opt.implementation} has no key",
        )
    return {"type": kind, "params": params}


def _gaps(plan: Plan, gaps: Gaps) -> None:
    stack = resolve_stack_defaults(plan).stack
    if stack not in ("deepspeed", "hf_trainer"):
        gaps.add("stack.name", f"a ds_config runs under DeepSpeed or the HF Trainer, not {stack}")
    par = plan.parallelism
    rule = rule_of(par.strategy)
    if rule.family not in ("ddp", "deepspeed"):
        gaps.add(
            "parallelism.strategy",
            f"{par.strategy} is not DeepSpeed; written as the equivalent ZeRO stage "
            f"{rule.zero_stage}",
        )
    for name in ("tp", "pp", "cp", "ep"):
        if getattr(par, name) > 1:
            gaps.add(
                f"parallelism.{name}",
                "set by the training script (e.g. Megatron-DeepSpeed), not ds_config",
            )
    rc = plan.method.recompute.policy
    if rc in ("selective", "every_k"):
        gaps.add(
            "method.recompute.policy",
            f"{rc} recomputation is the training script's (activation_checkpointing "
            "configures deepspeed.checkpointing only)",
        )


def ds_config(plan: Plan) -> tuple[dict[str, Any], tuple[Unexpressed, ...]]:
    """The config dict and the plan inputs it cannot carry."""
    plan = resolved(plan)  # fields left to the training stack take its defaults
    b, off = plan.batch, plan.offload
    gaps = Gaps()
    _gaps(plan, gaps)
    cfg: dict[str, Any] = {
        "train_batch_size": global_batch(plan),
        "train_micro_batch_size_per_gpu": b.micro_batch,
        "gradient_accumulation_steps": b.grad_accum,
        **_precision(plan, gaps),
        "zero_optimization": _zero(plan),
    }
    opt = _optimizer(plan, gaps)
    if opt is not None:
        cfg["optimizer"] = opt
    rc = plan.method.recompute.policy
    if rc in ("full", "offload"):
        cfg["activation_checkpointing"] = {
            "partition_activations": False,
            "cpu_checkpointing": rc == "offload",
            "contiguous_memory_optimization": False,
        }
    if "nvme" in (off.optimizer, off.params):
        cfg["aio"] = {"block_size": off.aio_block_size, "queue_depth": off.aio_queue_depth}
    return cfg, gaps()


def expressed(plan: Plan) -> frozenset[str]:
    """The plan fields this plan's ds_config carries (the round-trip contract)."""
    p = resolved(plan)
    off, prec = p.offload, p.method.precision
    out = {
        "batch.micro_batch",
        "batch.grad_accum",
        "batch.global_batch",
        "parallelism.dp",
        "parallelism.strategy",
        "method.precision.policy",
        "method.precision.compute_dtype",
        "method.precision.grad_dtype",
        "method.precision.loss_scaling",
        "parallelism.knobs.ds_reduce_bucket_elements",
        "parallelism.knobs.ds_allgather_bucket_elements",
        "parallelism.knobs.ds_overlap_comm",
        "offload.optimizer",
        "offload.params",
        "offload.sub_group_size",
    }
    if prec.policy == "amp_master":
        out.add("method.precision.optimizer_state_dtype")
    if rule_of(p.parallelism.strategy).zero_stage == 3:
        out |= {
            f"parallelism.knobs.ds_{k}"
            for k in (
                "prefetch_bucket_elements",
                "max_live_parameters",
                "max_reuse_distance",
                "param_persistence_threshold",
            )
        }
    if off.optimizer != "none":
        out |= {"offload.pin_memory", "offload.optimizer_buffer_count"}
    if off.params != "none":
        out |= {"offload.pin_memory", "offload.param_buffer_count", "offload.param_buffer_elements"}
    if "nvme" in (off.optimizer, off.params):
        out |= {"offload.aio_block_size", "offload.aio_queue_depth"}
    if p.method.optimizer.name in DS_OPTIMIZER:
        out |= {"method.optimizer.name", "method.optimizer.implementation"}
    if p.method.recompute.policy in ("full", "offload"):
        out.add("method.recompute.policy")
    return frozenset(out)


def export_deepspeed(plan: Plan) -> Export:
    cfg, gaps = ds_config(plan)
    text = json.dumps(cfg, indent=2) + "\n"
    advice: tuple[str, ...] = ()
    if "nvme_path" in text:
        advice = (f"nvme_path is a placeholder ({NVME_PATH}): set your NVMe mount",)
    if cfg.get("optimizer", {}).get("params", {}).get("lr") == LR_PLACEHOLDER:
        advice += (f"optimizer.params.lr {LR_PLACEHOLDER} is a placeholder: set your rate",)
    return Export("deepspeed", "ds_config.json", text, gaps, TARGET, advice=advice)
