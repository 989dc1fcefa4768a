"""The saved activations still live once the layers' backward has begun to free them.

``hbm.activations.saved.layers`` is live until the last layer's backward
(``backward.layers``); after it, autograd frees each layer's saved set as that layer's
backward finishes (torch 2.13 ``torch/csrc/autograd/engine.cpp``: a node's saved
variables are released after its ``apply`` unless ``retain_graph``). The working-set
rows (:mod:`engine.ledger.activations.working`) are net of the running layer's own saved
set, so without these rows nothing counted the layers not yet processed — the current
one included — at ``backward.middle`` and ``backward.end`` (issue 35 item 6: FSDP2 plans
traced 2.8–16 % above the ledger there):

- ``hbm.activations.remaining.middle`` — the second layer of backward (``backward.middle``,
  stages of three layers or more): every saved set but the last layer's, whose backward
  is done and whose reduce-scatter is in flight (the moment the reduce-scatter row
  counts). The last layer's own set is the largest kind's, or a checkpoint input when
  that layer is checkpointed (``StageLayers.ends``; under ``every_k`` it may not be);
- ``hbm.activations.remaining.first_layer`` — the first layer's backward (``backward.end``):
  its own saved set (a checkpoint input when checkpointed), plus the other micro-batches
  a pipeline stage still holds (``fly.times(one) − one``).

Both scale with the micro-batches in flight like the saved row (other micro-batches'
sets are whole) and take the activation band. With activation offloading the saved sets
are on the host and its own rows say what is on the GPU.
"""

from __future__ import annotations

from collections.abc import Callable

from engine.ledger.activations.schedule import InFlight
from engine.ledger.activations.stage_layers import StageLayers
from engine.ledger.activations.varying import Span, Varying, new_varying
from engine.ledger.row import (
    BACKWARD,
    Moment,
    Row,
    make_row,
    moments_in,
    with_middle,
)
from engine.units import fmt_count

_MIDDLE: frozenset[Moment] = frozenset({"backward.middle"})
_END: frozenset[Moment] = frozenset({"backward.end"})


def remaining_parts(
    sl: StageLayers,
    band: Callable[[int], Span],
    source: str,
    dtype: str,
) -> list[Varying]:
    """The two rows of the module docstring for a stage of layers ``sl`` (none for a
    stage without layers)."""
    if not sl.n_layers:
        return []
    one = sl.one
    last_own = sl.ckpt_bytes if sl.ends[0] else max([k.bytes for k in sl.kinds])
    first_own = sl.ckpt_bytes if sl.ends[2] else sl.kinds[0].bytes
    parts: list[Varying] = []
    middle = with_middle(_MIDDLE, sl.n_layers)
    if middle:
        parts.append(
            _part(
                "hbm.activations.remaining.middle",
                "Saved activations left at the second layer's backward",
                (one, last_own, 0),
                lambda fly: (
                    f"{fmt_count(one)} B × {fly.num}/{fly.den} in flight ({fly.why}) − the "
                    f"last layer's own {fmt_count(last_own)} B, freed by its backward"
                ),
                middle,
                band,
                source,
                dtype,
            )
        )
    parts.append(
        _part(
            "hbm.activations.remaining.first_layer",
            "Saved activations left at the first layer's backward",
            (one, one, first_own),
            lambda fly: (
                f"the first layer's own {fmt_count(first_own)} B + other micro-batches' "
                f"{fmt_count(one)} B × {fly.num}/{fly.den} in flight ({fly.why}) − this "
                f"one's {fmt_count(one)} B"
            ),
            _END,
            band,
            source,
            dtype,
        )
    )
    return parts


def _part(
    id_: str,
    label: str,
    size: tuple[int, int, int],
    words: Callable[[InFlight], str],
    moments: frozenset[Moment],
    band: Callable[[int], Span],
    source: str,
    dtype: str,
) -> Varying:
    """A row of ``max(0, fly.times(one) − take) + add`` bytes (``size``: (one, take,
    add)), banded: the bytes worked out in one frame (every fresh estimate sums them)."""
    one, take, add = size

    def span(fly: InFlight) -> Span:
        return band(max(0, -(-one * fly.num // fly.den) - take) + add)  # fly.times inlined

    def row(fly: InFlight, bytes_: Span, live: frozenset[Moment]) -> Row:
        return make_row(
            id=id_,
            state="activations",
            label=label,
            location="hbm",
            kind="peak",
            group="activations",
            low=bytes_[0],
            high=bytes_[1],
            formula=lambda: (
                f"{words(fly)} = {fmt_count(max(0, fly.times(one) - take) + add)} B; "
                "× activation band"
            ),
            source=source,
            phases=BACKWARD,
            moments=live,
            dtype=dtype,
        )

    return new_varying((span, row, True, moments_in(BACKWARD, moments)))
