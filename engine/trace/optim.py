"""The plan's optimizer over the trainable parameters, in its step implementation.

AdamW and SGD are torch.optim's, with ``foreach`` / ``fused`` / for-loop as the plan
says. Adafactor is transformers' (torch.optim.Adafactor reads its step counter with
``.item()``, which fake tensors cannot answer — pitfall 5). Lion, 8-bit Adam and
custom optimizers are refused in ``support.py``. The learning rate does not change
memory; the defaults are the libraries'.
"""

from __future__ import annotations

from typing import Any

import torch
from torch.distributed.tensor import DTensor

from engine.plan import Plan

LEARNING_RATE = 1e-4
"""Any positive rate: it scales values, never allocations."""
SGD_MOMENTUM = 0.9
"""``sgd_momentum``'s momentum (any non-zero value allocates the same buffer)."""


def param_groups(model: Any) -> list[dict[str, Any]]:
    """Trainable parameters, DTensors and plain tensors in separate groups: a foreach
    kernel cannot mix them (TP shards the decoder layers, not the embedding)."""
    trainable = [p for p in model.parameters() if p.requires_grad]
    dtensors = [p for p in trainable if isinstance(p, DTensor)]
    plain = [p for p in trainable if not isinstance(p, DTensor)]
    return [{"params": g} for g in (dtensors, plain) if g]


def make_optimizer(plan: Plan, model: Any) -> Any:
    opt = plan.method.optimizer
    groups = param_groups(model)
    impl = {"foreach": opt.implementation == "foreach", "fused": opt.implementation == "fused"}
    if opt.name == "adamw":
        return torch.optim.AdamW(groups, lr=LEARNING_RATE, **impl)
    if opt.name in ("sgd", "sgd_momentum"):
        momentum = SGD_MOMENTUM if opt.name == "sgd_momentum" else 0.0
        return torch.optim.SGD(groups, lr=LEARNING_RATE, momentum=momentum, **impl)
    if opt.name == "adafactor":
        from transformers.optimization import Adafactor

        return Adafactor(groups, lr=LEARNING_RATE, scale_parameter=False, relative_step=False)
    raise ValueError(f"optimizer {opt.name} is refused before this point")


def state_tensors(optimizer: Any) -> list[Any]:
    """Every tensor the optimizer keeps between steps (moments, step counters)."""
    return [v for state in optimizer.state.values() for v in state.values() if torch.is_tensor(v)]
