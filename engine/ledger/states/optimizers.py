"""Optimizer state per parameter tensor.

States are listed per tensor because real optimizers allocate per tensor: PyTorch's
AdamW keeps two moments *and* a 4-byte ``step`` tensor for every parameter (measured),
Adafactor factors the second moment of matrices into rows + columns, and bitsandbytes
keeps small tensors in 32-bit.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import prod
from typing import NamedTuple

from engine.sections.method import OptimizerSection

BNB_BLOCK = 256
"""bitsandbytes 8-bit optimizers quantize states in blocks of 256 with an fp32 absmax."""
BNB_MIN_8BIT_SIZE = 4096
"""bitsandbytes keeps tensors with fewer elements than this in 32-bit (min_8bit_size)."""
TORCHAO_QMAP_BYTES = 256 * 4
"""torchao's 8-bit state keeps its own fp32 lookup table of 256 codes per moment tensor
(subclass_8bit.py ``OptimState8bit.zeros``: ``torch.tensor(QMAP_SIGNED, device=...)``)."""
STEP_BYTES = 4
"""torch.optim keeps ``step`` as a float32 scalar tensor per parameter (measured)."""


@dataclass(frozen=True, slots=True)
class StateSpec:
    """One optimizer state: a name, and its bytes for a tensor of a given shape."""

    name: str
    label: str


class StateAlloc(NamedTuple):
    """Bytes of one optimizer state for one (sharded) tensor, as one allocation (a named
    tuple: an estimate builds one per tensor and state, and it is cheap to build)."""

    name: str
    n_bytes: int


def state_allocs(
    opt: OptimizerSection, shape: tuple[int, ...], state_bytes: int
) -> list[StateAlloc]:
    """The optimizer's allocations for one parameter tensor of ``shape``.

    ``state_bytes`` is the moments' element size (4 for fp32 state, 2 for bf16).
    """
    numel = prod(shape)
    if numel == 0:
        return []
    name = opt.name
    if name == "adamw":
        return [
            StateAlloc("exp_avg", numel * state_bytes),
            StateAlloc("exp_avg_sq", numel * state_bytes),
            StateAlloc("step", STEP_BYTES),
        ]
    if name == "adam8bit" and opt.adam8bit_library == "torchao":
        return torchao_8bit_allocs(numel, state_bytes)
    if name == "adam8bit":
        if numel < BNB_MIN_8BIT_SIZE:
            return [
                StateAlloc("exp_avg", numel * 4),
                StateAlloc("exp_avg_sq", numel * 4),
                StateAlloc("step", STEP_BYTES),
            ]
        blocks = -(-numel // BNB_BLOCK)
        return [
            StateAlloc("exp_avg", numel),
            StateAlloc("exp_avg_sq", numel),
            StateAlloc("quant_absmax", 2 * blocks * 4),
            StateAlloc("step", STEP_BYTES),
        ]
    if name == "sgd":
        return []
    if name == "sgd_momentum":
        return [StateAlloc("momentum_buffer", numel * state_bytes)]
    if name == "lion":
        return [StateAlloc("exp_avg", numel * state_bytes)]
    if name == "adafactor":
        if len(shape) >= 2:
            rows = prod(shape[:-1])
            cols = prod(shape[:-2]) * shape[-1]
            return [
                StateAlloc("exp_avg_sq_row", rows * 4),
                StateAlloc("exp_avg_sq_col", cols * 4),
                StateAlloc("step", STEP_BYTES),
            ]
        return [StateAlloc("exp_avg_sq", numel * 4), StateAlloc("step", STEP_BYTES)]
    # custom: a flat bytes-per-parameter figure, one allocation
    return [StateAlloc("custom_state", round(opt.custom_bytes_per_param * numel))]


def torchao_8bit_allocs(numel: int, state_bytes: int) -> list[StateAlloc]:
    """torchao ``AdamW8bit``'s state for one parameter of ``numel`` elements.

    torchao/prototype/low_bit_optim/adam.py ``_AdamBase._new_buffer`` (torchao at the
    November 2024 torchtune README, ao 26648c2): a tensor of at least 4096 elements whose
    size divides into blocks of 256 gets an ``OptimState8bit`` per moment
    (subclass_8bit.py ``OptimState8bit.zeros``: uint8 ``codes`` of the tensor's size, an
    fp32 ``scale`` per block of 256 and its own 256-entry fp32 ``qmap``); any other
    tensor gets ``torch.zeros_like(p)``, the parameter's dtype (``state_bytes``). The
    ``step`` counter is ``torch.tensor(0.0)``, on the host: no HBM.
    """
    if numel < BNB_MIN_8BIT_SIZE or numel % BNB_BLOCK:
        return [
            StateAlloc("exp_avg", numel * state_bytes),
            StateAlloc("exp_avg_sq", numel * state_bytes),
        ]
    blocks = numel // BNB_BLOCK
    return [
        StateAlloc("exp_avg", numel),
        StateAlloc("exp_avg_sq", numel),
        StateAlloc("exp_avg_scale", blocks * 4),
        StateAlloc("exp_avg_sq_scale", blocks * 4),
        StateAlloc("quant_map", 2 * TORCHAO_QMAP_BYTES),
    ]


OPTIMIZER_LABELS: dict[str, str] = {
    "exp_avg": "first moment (exp_avg)",
    "exp_avg_sq": "second moment (exp_avg_sq)",
    "step": "step counters",
    "quant_absmax": "8-bit block absmax constants",
    "exp_avg_scale": "8-bit first moment's block scales",
    "exp_avg_sq_scale": "8-bit second moment's block scales",
    "quant_map": "8-bit code lookup tables",
    "momentum_buffer": "momentum buffer",
    "exp_avg_sq_row": "factored second moment, rows",
    "exp_avg_sq_col": "factored second moment, columns",
    "custom_state": "custom optimizer state",
}

OPTIMIZER_SOURCES: dict[str, str] = {
    "adamw": "torch-adamw",
    "adam8bit": "bnb-8bit-optim",
    "sgd": "torch-sgd",
    "sgd_momentum": "torch-sgd",
    "lion": "lion-paper",
    "adafactor": "adafactor-paper",
    "custom": "user-input",
}


def optimizer_source(opt: OptimizerSection) -> str:
    """The optimizer state rows' source key (torchao's 8-bit AdamW has its own)."""
    if opt.name == "adam8bit" and opt.adam8bit_library == "torchao":
        return TORCHAO_SOURCE
    return OPTIMIZER_SOURCES.get(opt.name, "user-input")


TORCHAO_SOURCE = "torchao-low-bit-optim"
