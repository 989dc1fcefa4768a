"""QLoRA's 4-bit NormalFloat base weights (Dettmers et al. 2023) as bitsandbytes stores them.

Per quantized tensor: the packed 4-bit data (two values per byte), one absmax per block
of ``block_size`` values — fp32, or with double quantization uint8 plus one fp32
second-level absmax per 256 blocks and an fp32 offset. Each is its own allocation.
"""

from __future__ import annotations

from engine.ledger.held import HeldTensor
from engine.ledger.row import Row, make_row
from engine.models.inventory import Tensor
from engine.models.roles import role_info
from engine.sections.method import QloraSection
from engine.units import ceil_div, fmt_count, round_up

SECOND_LEVEL_BLOCK = 256
"""Double quantization groups 256 first-level absmax constants (QLoRA paper §3)."""


def is_quantized(t: Tensor) -> bool:
    """Linear layers bitsandbytes replaces with 4-bit ones — the projections the roles
    table marks as adapter targets; embeddings, lm_head, norms and routers stay
    unquantized (transformers keeps the output embedding in full precision)."""
    return t.kind == "weight" and len(t.shape) == 2 and role_info(t.role).lora_target


def _constants_bytes(numel: int, q: QloraSection) -> list[int]:
    blocks = ceil_div(numel, q.block_size)
    if not q.double_quant:
        return [blocks * 4]
    return [blocks, ceil_div(blocks, SECOND_LEVEL_BLOCK) * 4, 4]


def quantized_rows(held: list[HeldTensor], q: QloraSection, granularity: int) -> list[Row]:
    """Rows for the NF4 data and its quantization constants on this rank."""
    qs = [t for t in held if t.category == "quantized"]
    if not qs:
        return []
    numel = sum(t.numel * t.count for t in qs)
    data = sum(round_up(ceil_div(t.numel, 2), granularity) * t.count for t in qs)
    consts = sum(
        round_up(b, granularity) * t.count for t in qs for b in _constants_bytes(t.numel, q)
    )
    if q.double_quant:
        words = (
            f"per tensor: ceil(n/{q.block_size}) uint8 absmax + ceil(blocks/"
            f"{SECOND_LEVEL_BLOCK}) × 4 B fp32 second-level absmax + 4 B offset"
        )
    else:
        words = f"per tensor: ceil(n/{q.block_size}) × 4 B fp32 absmax"
    return [
        make_row(
            id="hbm.weights.nf4",
            label="Quantized base weights (NF4)",
            state="weights",
            checkpoint="weights",
            location="hbm",
            kind="persistent",
            group="weights",
            low=data,
            high=data,
            dtype="nf4",
            formula=(
                f"{fmt_count(numel)} elements in {sum(t.count for t in qs)} tensors × 0.5 B "
                f"(4-bit, two per byte), each rounded up to {granularity} B = {fmt_count(data)} B"
            ),
            source="qlora-paper",
        ),
        make_row(
            id="hbm.weights.nf4_constants",
            label="NF4 quantization constants",
            state="weights",
            checkpoint="weights",
            location="hbm",
            kind="persistent",
            group="weights",
            low=consts,
            high=consts,
            formula=f"{words}, each allocation rounded up to {granularity} B = "
            f"{fmt_count(consts)} B",
            source="qlora-paper",
        ),
    ]
