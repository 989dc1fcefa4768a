"""LoRA adapters (Hu et al. 2021) as PEFT adds them, placed like their base layer.

Each targeted linear W (out × in) gains A (r × in) and B (out × r): r·(in + out)
trainable parameters. Under tensor parallelism the adapter follows its base layer: a
column-parallel base splits B's rows, a row-parallel base splits A's columns.

LitGPT's ``LoRAQKVLinear`` (litgpt/lora.py, ``method.lora.implementation = litgpt``)
is one adapter on the fused qkv linear whose q / k / v targets are its ``enable_lora``
flags: A is (r · enabled parts × in) (``lora_A``), B has a row per output feature of an
enabled part (``lora_B``: ``sum(qkv_shapes)`` rows). The fused tensor does not carry its
q / kv split, so B is given the fused linear's every row: r × the disabled parts' widths
too many (Llama-2-7B q+v: r·4096 per layer, 0.2 % of its plan's total).
"""

from __future__ import annotations

from engine.ledger.placement import LocalTensor
from engine.models.inventory import Tensor
from engine.models.roles import tp_split_dim
from engine.sections.method import LoraSection

QKV_PARTS = frozenset({"q", "k", "v"})
"""The targets LitGPT's ``LoRAQKVLinear`` takes as flags (``lora_query``, ``lora_key``,
``lora_value``)."""


def litgpt_parts(lora: LoraSection) -> frozenset[str]:
    """The q / k / v parts LitGPT's fused qkv adapter enables (empty under peft)."""
    if lora.implementation != "litgpt":
        return frozenset()
    return frozenset(lora.targets) & QKV_PARTS


def is_target(t: Tensor, lora: LoraSection) -> bool:
    """Whether PEFT (or LitGPT, on its fused qkv) would wrap this tensor's module."""
    if t.kind != "weight" or len(t.shape) != 2:
        return False
    return t.role in lora.targets or (t.role == "qkv" and bool(litgpt_parts(lora)))


def adapter_shapes(base: LocalTensor, lora: LoraSection) -> list[tuple[str, tuple[int, ...]]]:
    """The local (A, B) shapes for one targeted base tensor on this rank."""
    out_full, in_full = base.tensor.shape
    out_local, in_local = base.shape
    r = lora.rank
    prefix = base.tensor.name.removesuffix(".weight")
    split = tp_split_dim(base.tensor)
    parts = len(litgpt_parts(lora))
    a_rows = r * parts if parts and base.tensor.role == "qkv" else r
    if split == 0:
        a, b = (a_rows, in_full), (out_local, r)
    elif split == 1:
        a, b = (a_rows, in_local), (out_full, r)
    else:
        a, b = (a_rows, in_local), (out_local, r)
    return [(f"{prefix}.lora_A.default.weight", a), (f"{prefix}.lora_B.default.weight", b)]


def lora_param_count(tensors: tuple[Tensor, ...], lora: LoraSection) -> int:
    """Total adapter parameters over the whole model: Σ r·(in + out) over targets
    (LitGPT's fused qkv adapter: A of r per enabled part)."""
    n = len(litgpt_parts(lora))
    return sum(
        lora.rank * ((n if n and t.role == "qkv" else 1) * t.shape[1] + t.shape[0])
        for t in tensors
        if is_target(t, lora)
    )
