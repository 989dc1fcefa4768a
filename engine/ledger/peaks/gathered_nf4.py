"""QLoRA's packed 4-bit weights in gathered parameter units (``hbm.gathered.*``).

A gathered unit holds what the strategy all-gathers, and for QLoRA that is the packed
data as bitsandbytes stores it, not a 16-bit weight (source review R2):

- stored in a floating dtype (``bnb_4bit_quant_storage=bfloat16``, peft's FSDP / ZeRO-3
  recipes), each weight's packed data is a ``((n + 1) // (2·itemsize), 1)`` parameter
  (bitsandbytes ``functional.quantize_4bit``) that FSDP and ZeRO-3 gather as it is —
  0.5 B per weight, the compute-dtype copy only made by the dequantize in the matmul
  (:mod:`engine.ledger.peaks.dequantize`);
- stored as uint8, it is never gathered: accelerate's FSDP2 path puts uint8
  ``Params4bit`` in ``ignored_params`` (``utils/fsdp_utils.py``), and the rank keeps it
  whole (:mod:`engine.ledger.states.quantized`).

:func:`gathered_view` rewrites a stage's placed tensors accordingly, so the unit sizes,
FSDP2's padded all-gather buffer and ZeRO-3's layer count read packed shapes.
"""

from __future__ import annotations

from engine.ledger.placement import LocalTensor
from engine.ledger.precision import DTYPE_BYTES
from engine.ledger.states.quantized import FLOATING_STORAGE, is_quantized, packed_elements
from engine.plan import Plan

_VIEWS: dict[int, tuple[tuple[LocalTensor, ...], str, int, bool, tuple[LocalTensor, ...]]] = {}
""":func:`gathered_view` by the placed tuple's identity (the placement is cached, so a
layout search passes the same tuple again; the entry holds it, so its id is not reused)
— the view must be the same tuple each time for the gathered units' own cache."""


def gathered_view(plan: Plan, placed: tuple[LocalTensor, ...], gb: int) -> tuple[LocalTensor, ...]:
    """``placed`` as the strategy gathers it, ``gb`` bytes per gathered element: QLoRA's
    quantized weights as their packed data (floating storage, in elements of ``gb``
    bytes so the units' byte sums read 0.5 B per weight) or left out (uint8 storage);
    ``placed`` itself for any other method."""
    if plan.method.kind != "qlora":
        return placed
    storage = plan.method.qlora.quant_storage
    head = plan.method.qlora.quantize_lm_head
    got = _VIEWS.get(id(placed))
    if got is not None and got[0] is placed and got[1:4] == (storage, gb, head):
        return got[4]
    floating = storage in FLOATING_STORAGE
    out: list[LocalTensor] = []
    for t in placed:
        if not is_quantized(t.tensor, head):
            out.append(t)
        elif floating:
            packed_bytes = packed_elements(t.numel, storage) * DTYPE_BYTES[storage]
            out.append(LocalTensor(t.tensor, (-(-packed_bytes // gb), 1), t.expert, t.count))
    view = tuple(out)
    if len(_VIEWS) >= 1024:
        _VIEWS.clear()
    _VIEWS[id(placed)] = (placed, storage, gb, head, view)
    return view


def reused_layer_bytes(plan: Plan, elements: int, gb: int) -> int:
    """Bytes of ``elements`` decoder-layer parameters ZeRO-3 keeps gathered across the
    loss (reuse distance): QLoRA's are almost all quantized linears, gathered packed at
    0.5 B per weight with floating storage and not at all with uint8 (the layers' norms,
    a few thousand elements, are left out); ``gb`` per element otherwise."""
    if plan.method.kind != "qlora":
        return elements * gb
    return elements // 2 if plan.method.qlora.quant_storage in FLOATING_STORAGE else 0


def reused_per_element(plan: Plan, gb: int, in_layers: bool) -> str:
    """What one kept element costs, in the reuse rows' formula (:func:`reused_layer_bytes`)."""
    if not in_layers or plan.method.kind != "qlora":
        return f"{gb} B"
    if plan.method.qlora.quant_storage in FLOATING_STORAGE:
        return "0.5 B (QLoRA's packed 4-bit data)"
    return "0 B (uint8-stored 4-bit data is not gathered)"
