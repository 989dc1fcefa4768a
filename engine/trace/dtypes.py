"""MemPlan's precision policy as torch dtypes: what the parameters are stored in, what
the forward computes in, and whether an autocast or FSDP2 mixed-precision policy casts.

``fp32``: everything fp32. ``pure_16bit``: parameters (and so gradients and AdamW
state) in the compute dtype. ``autocast``: fp32 parameters — the master — with compute
in ``compute_dtype``: FSDP2's ``MixedPrecisionPolicy(param_dtype=compute,
reduce_dtype=grad_dtype)`` when sharded, ``torch.autocast`` otherwise (the mapping of
``tests/measured_cases.py``). ``amp_master`` is refused in ``support.py``.
"""

from __future__ import annotations

from typing import Any

import torch

from engine.plan import Plan

_DTYPES: dict[str, Any] = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}


def torch_dtype(name: str) -> Any:
    """``"bf16"`` → ``torch.bfloat16`` (the section's dtype names)."""
    return _DTYPES[name]


def param_dtype(plan: Plan) -> Any:
    """The dtype parameters are created and stored in."""
    prec = plan.method.precision
    return torch_dtype(prec.compute_dtype if prec.policy == "pure_16bit" else "fp32")


def compute_dtype(plan: Plan) -> Any:
    return torch_dtype(plan.method.precision.compute_dtype)


def casts_compute(plan: Plan) -> bool:
    """Whether a policy casts fp32 parameters to a 16-bit compute dtype."""
    prec = plan.method.precision
    return prec.policy == "autocast" and prec.compute_dtype != "fp32"


def dtype_name(dtype: Any) -> str:
    return {v: k for k, v in _DTYPES.items()}.get(dtype, str(dtype))
