"""QLoRA's 4-bit NormalFloat base weights (Dettmers et al. 2023) as bitsandbytes stores them.

Per quantized tensor: the packed 4-bit data (two values per byte), one absmax per block
of ``block_size`` values — fp32, or with double quantization uint8 plus one fp32
second-level absmax per 256 blocks and an fp32 offset. Each is its own allocation.

torchao's ``NF4Tensor`` (torchtune's QLoRA, ``method.qlora.nf4_impl = torchao``;
torchao/dtypes/nf4tensor.py ``NF4Tensor.from_tensor`` / ``double_quantize_scalers``)
always double-quantizes, and keeps five tensors per weight: the packed uint8 data, the
int8 per-block scalers (``ceil(n / block_size)``), one quantization factor per 256
scalers and the scalers' mean, both in the dtype the weight was quantized from, and the
16-entry NF4 lookup table in that dtype. Under FSDP2 ``fsdp_pre_all_gather`` hands the
data, scalers and factors to the all-gather: they are sharded like a parameter, the
mean and the table stay whole.

The packed data's storage dtype (``bnb_4bit_quant_storage``) decides whether a
sharding strategy shards it: stored as uint8 it is never partitioned (FSDP2 ignores it),
stored as a floating dtype it is a parameter like any other, which ZeRO-3 partitions
and FSDP shards (source review R2). The constants are attributes of the quant state, not
parameters: they stay whole on every rank.
"""

from __future__ import annotations

from functools import partial

from engine.ledger.held import HeldTensor
from engine.ledger.precision import DTYPE_BYTES
from engine.ledger.row import Formula, Row, make_row, text
from engine.ledger.states.allocs import ShardContext, state_sized
from engine.models.inventory import Tensor
from engine.models.roles import role_info
from engine.sections.method import QloraSection
from engine.units import ceil_div, fmt_count, round_up

FLOATING_STORAGE = frozenset({"bf16", "fp16", "fp32"})
"""Storage dtypes that make the packed data a floating parameter FSDP / ZeRO-3 shard."""

SECOND_LEVEL_BLOCK = 256
"""Double quantization groups 256 first-level absmax constants (QLoRA paper §3)."""


def is_quantized(t: Tensor, lm_head: bool = False) -> bool:
    """Linear layers bitsandbytes replaces with 4-bit ones — the projections the roles
    table marks as adapter targets; embeddings, norms and routers stay unquantized.
    transformers keeps the output embedding in full precision too
    (``get_keys_to_not_convert``); Lightning Fabric's ``BitsandbytesPrecision`` (LitGPT)
    swaps every ``torch.nn.Linear`` for its 4-bit class, lm_head included
    (lightning/fabric/plugins/precision/bitsandbytes.py ``module_init_context``,
    ``_convert_layers``): ``lm_head`` is ``method.qlora.quantize_lm_head``."""
    if t.kind != "weight" or len(t.shape) != 2:
        return False
    return role_info(t.role).lora_target or (lm_head and t.role == "lm_head")


NF4_TABLE = 16
"""torchao's NF4 lookup table: 16 values, in the weight's dtype, one per weight."""


def _constants_bytes(numel: int, q: QloraSection, shards: int = 1) -> list[int]:
    """Each constant allocation of one quantized weight of ``numel`` elements; under
    torchao the scalers and factors split over ``shards`` ranks (FSDP2)."""
    blocks = ceil_div(numel, q.block_size)
    if q.nf4_impl == "torchao":
        c = DTYPE_BYTES[q.compute_dtype]
        scalers = ceil_div(blocks, shards)
        factors = ceil_div(ceil_div(blocks, SECOND_LEVEL_BLOCK), shards) * c
        return [scalers, factors, c, NF4_TABLE * c]
    if not q.double_quant:
        return [blocks * 4]
    return [blocks, ceil_div(blocks, SECOND_LEVEL_BLOCK) * 4, 4]


def _constants_words(q: QloraSection, sharded: bool) -> str:
    if q.nf4_impl == "torchao":
        c = DTYPE_BYTES[q.compute_dtype]
        split = " (÷ the shard group: FSDP2 all-gathers them)" if sharded else ""
        return (
            f"per tensor (torchao NF4Tensor): ceil(n/{q.block_size}) int8 scalers + "
            f"ceil(blocks/{SECOND_LEVEL_BLOCK}) × {c} B factors{split} + {c} B scaler mean "
            f"+ {NF4_TABLE} × {c} B lookup table"
        )
    if q.double_quant:
        return (
            f"per tensor: ceil(n/{q.block_size}) uint8 absmax + ceil(blocks/"
            f"{SECOND_LEVEL_BLOCK}) × 4 B fp32 second-level absmax + 4 B offset"
        )
    return f"per tensor: ceil(n/{q.block_size}) × 4 B fp32 absmax"


def packed_elements(numel: int, storage: str) -> int:
    """Elements of the packed data of an ``numel``-weight tensor stored as ``storage``:
    bitsandbytes ``functional.quantize_4bit`` allocates ``((n + 1) // mod, 1)`` of
    ``quant_storage``, ``mod`` = its item size × 2 (two 4-bit values per byte)."""
    return (numel + 1) // (2 * DTYPE_BYTES.get(storage, 1))


def shards_packed(q: QloraSection, ctx: ShardContext) -> bool:
    """Whether the strategy shards the packed data: a floating storage dtype under a
    strategy that shards parameters (ZeRO-3, FSDP); torchao's NF4Tensor under any such
    strategy (its uint8 data is split by the subclass's own chunk ops)."""
    if q.nf4_impl == "torchao":
        return ctx.rule.params
    return ctx.rule.params and q.quant_storage in FLOATING_STORAGE


def _sharded_data(qs: list[HeldTensor], q: QloraSection, ctx: ShardContext) -> tuple[int, Formula]:
    """The packed data sharded like the weights (``(n/4, 1)`` bf16 for bf16 storage):
    (bytes, formula)."""
    st = q.quant_storage
    packed = [
        HeldTensor(
            t.name,
            (packed_elements(t.numel, st), 1),
            t.unit,
            "quantized",
            False,
            st,
            st,
            st,
            t.group,
            t.persistent_full,
            t.count,
            t.expert,
        )
        for t in qs
    ]
    n, formula, _ = state_sized(packed, True, ctx, "param_dtype", whole_if_persistent=True)
    return n, partial(_sharded_formula, st, formula)


def _sharded_formula(storage: str, formula: Formula) -> str:
    return (
        f"packed 4-bit data stored as {storage} (bnb_4bit_quant_storage; "
        f"{2 * DTYPE_BYTES[storage]} weights per element, 0.5 B each), sharded: {text(formula)}"
    )


def _torchao_sharded_data(qs: list[HeldTensor], granularity: int) -> tuple[int, str]:
    """torchao's packed data under FSDP2: the NF4Tensor splits by rows like a parameter
    (rank 0 holds ceil(d0/N) of them), half a byte per weight: (bytes, formula)."""
    data = 0
    for t in qs:
        d0 = t.shape[0]
        rows = ceil_div(d0, t.group) if d0 else 0
        data += round_up(ceil_div(rows * (t.numel // d0 if d0 else 0), 2), granularity) * t.count
    n = sum(t.count for t in qs)
    return data, (
        f"{n} tensors (torchao NF4Tensor), ceil(rows / shard group) rows each × 0.5 B "
        f"(4-bit, two per byte), each rounded up to {granularity} B = {fmt_count(data)} B"
    )


def quantized_rows(
    held: list[HeldTensor], q: QloraSection, granularity: int, ctx: ShardContext | None = None
) -> list[Row]:
    """Rows for the NF4 data and its quantization constants on this rank; the data
    sharded as ``ctx`` says when the strategy shards it (:func:`shards_packed`)."""
    qs = [t for t in held if t.category == "quantized"]
    if not qs:
        return []
    numel = sum(t.numel * t.count for t in qs)
    data = sum(round_up(ceil_div(t.numel, 2), granularity) * t.count for t in qs)
    data_formula: Formula = (
        f"{fmt_count(numel)} elements in {sum(t.count for t in qs)} tensors × 0.5 B "
        f"(4-bit, two per byte), each rounded up to {granularity} B = {fmt_count(data)} B"
    )
    torchao = q.nf4_impl == "torchao"
    src = "torchao-nf4" if torchao else "qlora-paper"
    sharded = ctx is not None and shards_packed(q, ctx)
    if ctx is not None and sharded and torchao:
        data, data_formula = _torchao_sharded_data(qs, granularity)
    elif ctx is not None and sharded:
        data, data_formula = _sharded_data(qs, q, ctx)
        src = "peft-qlora-sharded"
    split = torchao and sharded
    consts = sum(
        round_up(b, granularity) * t.count
        for t in qs
        for b in _constants_bytes(t.numel, q, t.group if split else 1)
    )
    words = _constants_words(q, split)
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
            formula=data_formula,
            source=src,
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
            source="torchao-nf4" if torchao else "qlora-paper",
        ),
    ]
