"""Float8 training's fp8 weight cast (``hbm.float8.weight_cast``).

torchao's ``Float8Linear`` (torchtitan ``--model.converters float8``) runs each decoder
linear through ``matmul_with_hp_or_float8_args`` (torchao 0.9+,
torchao/float8/float8_linear.py, source ``torchao-float8-linear``). What it keeps and
what it makes, and so what the ledger counts:

- **saved for backward**: ``ctx.save_for_backward(input_hp, weight_hp_t)`` — the
  16-bit input and weight, the tensors a 16-bit linear keeps anyway. The saved
  activations are therefore the eager ones (no row changes); under FSDP2 the weight is
  the unsharded parameter, freed at reshard as without Float8.
- **temporaries**: forward casts the input and the weight to e4m3 (``hp_tensor_to_
  float8_dynamic``) for ``torch._scaled_mm``; backward recasts the weight, the output
  gradient and the input. One linear runs at a time, so the weight's cast is one linear's
  weight at 1 B an element, live in forward and in the layers' backward. With
  ``float8_all_gather`` (``fsdp_utils.WeightWithDynamicFloat8CastTensor``) FSDP2 gathers
  the weight already in fp8 and forward makes no cast of it; backward still recasts the
  16-bit weight for the input gradient, so the row stays, in backward only. The input's
  cast (1 B a token and feature) reads the micro-batch's shape and is within the layer's
  working set band; it is not a row here.
- **amax / scale buffers**: ``Float8Linear.create_buffers`` registers them only under
  delayed scaling; torchtitan uses dynamic scaling (tensorwise or rowwise), so none.

Not modelled: the gathered units at 1 B an element under fp8 all-gather (the gathered
rows keep 16-bit units: a conservative high end), and Transformer Engine's fp8 in
Megatron (``--fp8-format``), whose per-module amax histories and fp8 weight copies
(``--fp8-param-gather``) follow TE's own modules.

The row reads the placed (TP / PP / EP-split) tensors only, never DP, CP or the
micro-batch: the layout search's bounds see a constant in DP like the dequantize row.
"""

from __future__ import annotations

from collections.abc import Iterable

from engine.ledger.placement import LocalTensor
from engine.ledger.row import BACKWARD, FORWARD_BACKWARD, IN_LAYERS, Row, make_row
from engine.sections.method import PrecisionSection
from engine.units import fmt_count, round_up

FP8_BYTES = 1
SOURCE = "torchao-float8-linear"

DECODER_LINEARS = frozenset({"q", "k", "v", "qkv", "o", "gate", "up", "gate_up", "down"})
"""torchtitan converts every ``nn.Linear`` but the output layer (``filter_fqns``
default ``["output"]``): the decoder layers' projections."""


def float8_rows(
    precision: PrecisionSection, placed: Iterable[LocalTensor], granularity: int
) -> list[Row]:
    """The largest float8 linear's fp8 weight cast on this rank (none without Float8)."""
    if precision.float8 == "none":
        return []
    sizes = [
        t.numel
        for t in placed
        if t.tensor.kind == "weight"
        and not t.expert  # stacked experts are grouped GEMMs, not nn.Linear modules
        and t.tensor.layer is not None
        and t.tensor.role in DECODER_LINEARS
    ]
    if not sizes:
        return []
    largest = max(sizes)
    cast = round_up(largest * FP8_BYTES, granularity)
    gather = precision.float8_all_gather
    when = "backward's recast only (forward gathers fp8)" if gather else "forward and backward"
    return [
        make_row(
            id="hbm.float8.weight_cast",
            label="Float8: one linear's weight cast to fp8",
            state="gathered",
            location="hbm",
            kind="peak",
            group="gathered",
            low=cast,
            high=cast,
            formula=f"largest float8 linear {fmt_count(largest)} el. × {FP8_BYTES} B "
            f"(e4m3, {precision.float8} scaling) = {fmt_count(cast)} B, one linear at a "
            f"time, {when}",
            source=SOURCE,
            phases=BACKWARD if gather else FORWARD_BACKWARD,
            backward=IN_LAYERS,
        )
    ]
