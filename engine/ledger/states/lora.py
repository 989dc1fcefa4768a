"""LoRA adapters (Hu et al. 2021) as PEFT adds them, placed like their base layer.

Each targeted linear W (out × in) gains A (r × in) and B (out × r): r·(in + out)
trainable parameters. Under tensor parallelism the adapter follows its base layer: a
column-parallel base splits B's rows, a row-parallel base splits A's columns.
"""

from __future__ import annotations

from engine.ledger.placement import LocalTensor
from engine.models.inventory import Tensor
from engine.models.roles import tp_split_dim
from engine.sections.method import LoraSection


def is_target(t: Tensor, lora: LoraSection) -> bool:
    """Whether PEFT would wrap this tensor's module with an adapter."""
    return t.kind == "weight" and len(t.shape) == 2 and t.role in lora.targets


def adapter_shapes(base: LocalTensor, lora: LoraSection) -> list[tuple[str, tuple[int, ...]]]:
    """The local (A, B) shapes for one targeted base tensor on this rank."""
    out_full, in_full = base.tensor.shape
    out_local, in_local = base.shape
    r = lora.rank
    prefix = base.tensor.name.removesuffix(".weight")
    split = tp_split_dim(base.tensor)
    if split == 0:
        a, b = (r, in_full), (out_local, r)
    elif split == 1:
        a, b = (r, in_local), (out_full, r)
    else:
        a, b = (r, in_local), (out_local, r)
    return [(f"{prefix}.lora_A.default.weight", a), (f"{prefix}.lora_B.default.weight", b)]


def lora_param_count(tensors: tuple[Tensor, ...], lora: LoraSection) -> int:
    """Total adapter parameters over the whole model: Σ r·(in + out) over targets."""
    return sum(lora.rank * (t.shape[0] + t.shape[1]) for t in tensors if is_target(t, lora))
