"""A ledger Row: the unit of truth for every byte MemPlan reports, and its one factory.

Each row is tensor count × bytes per element × replication ÷ the divisor of the group
that really shards it, at one location, live in certain phases of the step, with the
numbers substituted into its formula and a key into ``resources/sources.json``.

A row's ``id`` is a user-facing key only: code never branches on it. What code needs to
know about a row is a typed field — the state it belongs to, the moments of the step it
is live at, its part of a checkpoint, its role — set where the row is built, by
:func:`make_row`.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache
from typing import Any, Literal, NamedTuple

Location = Literal["hbm", "host", "nvme", "checkpoint"]
RowKind = Literal["persistent", "peak"]
Phase = Literal["steady", "forward", "backward", "optimizer", "checkpoint"]
Scope = Literal["rank", "node", "job"]
Moment = Literal[
    "steady",
    "forward",
    "backward.start",
    "backward.layers",
    "backward.middle",
    "backward.end",
    "optimizer",
    "checkpoint",
]
State = Literal[
    "weights",  # parameters the rank holds (trained, frozen, adapters, NF4 base)
    "grads",  # the rank's (sharded) gradients
    "master",  # the fp32 master copy of trainable weights
    "optimizer",  # optimizer state (moments, step counters, main-grad shard)
    "activations",  # tensors saved for backward and backward's working set
    "inputs",  # the micro-batch itself
    "buffers",  # module buffers (rotary inv_freq)
    "loss",  # logits and the loss's saved tensors and temporaries
    "gathered",  # unsharded parameter units (ZeRO-3 / FSDP)
    "buckets",  # gradient communication buffers
    "grad_accumulation",  # unsharded gradients held across micro-batches
    "optimizer_step",  # the optimizer step's temporaries
    "workspace",  # cuBLAS(Lt) workspaces the caching allocator holds per (handle, stream)
    "runtime",  # device memory outside PyTorch: CUDA context, NCCL
    "allocator",  # the caching allocator's reserve over what is allocated
    "checkpoint",  # a checkpoint being assembled, staged or stored
    "swap_buffers",  # host staging buffers of NVMe offload
    "processes",  # host processes: training ranks, data loaders, the OS
]
CheckpointPart = Literal["weights", "adapters", "optimizer"]
"""What a persistent state row contributes to a checkpoint: the model's weights, LoRA
adapters (all PEFT saves), or the optimizer (master copy and state)."""
Role = Literal[
    "root_unit",
    "layer_units",
    "all_gather_output",
    "prefetched_unit",
    "reduce_scatter_input",
    "cuda_context",
    "cublas_workspace",
    "nccl_buffers",
]
"""A row other code asks for by name: FSDP's root unit (the largest unit a consolidated
checkpoint gathers), its layer units in flight (what FSDP1's reserve reads), FSDP2's
all-gather output buffer (the all-gather stream's pool, what FSDP2's reserve reads),
FSDP1's last layer unit the root prefetches before the loss (in the unshard pool the
layer units hold, so the side bytes leave it out), FSDP2's reduce-scatter input of a
layer unit (the reduce-scatter stream's pool before torch 2.5) and
the runtime rows each runtime input scales."""

PHASES: tuple[Phase, ...] = ("steady", "forward", "backward", "optimizer", "checkpoint")
LOCATIONS: tuple[Location, ...] = ("hbm", "host", "nvme", "checkpoint")
MOMENTS: tuple[tuple[Moment, Phase], ...] = (
    ("steady", "steady"),
    ("forward", "forward"),
    ("backward.start", "backward"),
    ("backward.layers", "backward"),
    ("backward.middle", "backward"),
    ("backward.end", "backward"),
    ("optimizer", "optimizer"),
    ("checkpoint", "checkpoint"),
)
"""The step timeline: each phase's moments (see :mod:`engine.ledger.phases`)."""

ALL_PHASES: frozenset[Phase] = frozenset(PHASES)
FORWARD: frozenset[Phase] = frozenset({"forward"})
BACKWARD: frozenset[Phase] = frozenset({"backward"})
FORWARD_BACKWARD: frozenset[Phase] = frozenset({"forward", "backward"})
OPTIMIZER: frozenset[Phase] = frozenset({"optimizer"})
CHECKPOINT: frozenset[Phase] = frozenset({"checkpoint"})

NO_MOMENTS: frozenset[Moment] = frozenset()
AT_LOSS: frozenset[Moment] = frozenset({"backward.start"})
"""Within backward, live only during the loss's backward (freed before the layers')."""
UNTIL_LAYERS_FREE: frozenset[Moment] = frozenset({"backward.start", "backward.layers"})
"""Within backward, live until the layers' backward starts freeing them: every layer's
saved set (a middle and the first layer's moments count what is left, separately)."""
THROUGH_LAYERS: frozenset[Moment] = frozenset(
    {"backward.start", "backward.layers", "backward.middle", "backward.end"}
)
"""Within backward, live until the last layer's backward is done (rotary cos / sin)."""
IN_LAYERS: frozenset[Moment] = frozenset({"backward.layers", "backward.middle", "backward.end"})
"""Within backward, live once the layers' backward runs (working set, gathered units)."""
BEFORE_FIRST_LAYER: frozenset[Moment] = frozenset(
    {"backward.start", "backward.layers", "backward.middle"}
)
"""Within backward, live until the first layer's backward (FSDP2's prefetch buffer:
nothing is left to all-gather once the first layer is reached)."""
AFTER_LAST_LAYER: frozenset[Moment] = frozenset({"backward.middle", "backward.end"})
"""Within backward, live once a layer's gradients were reduced (FSDP2's reduce-scatter
buffer: none exists while the last layer's backward runs)."""


def with_middle(moments: frozenset[Moment], n_layers: int) -> frozenset[Moment]:
    """``moments`` for a stage of ``n_layers``: a stage with fewer than three layers has
    no middle layer, so nothing is live at ``backward.middle``."""
    return moments if n_layers >= 3 else moments - {"backward.middle"}


ACCUMULATED_MOMENTS: frozenset[Moment] = frozenset(
    {"forward", "backward.start", "backward.layers", "backward.middle"}
)
"""Under gradient accumulation, earlier micro-batches' gradient sums are live here too."""
GRADIENT_MOMENTS: frozenset[Moment] = frozenset({"backward.end", "optimizer"})
"""A gradient exists once backward has produced it, until the optimizer step."""
STEP_GRADIENT_MOMENTS: frozenset[Moment] = frozenset({"optimizer"})
"""Gradients allocated one by one as backward reaches each parameter: all of them exist
only after the first layer's backward (``backward.end`` counts those made before it in
a row of its own, :mod:`engine.ledger.peaks.backward_grads`)."""
STEP_ACCUMULATED_MOMENTS: frozenset[Moment] = ACCUMULATED_MOMENTS | {"backward.end"}
"""Under gradient accumulation every gradient's earlier sums are live at backward.end."""

NOT_ALLOCATED: frozenset[State] = frozenset({"runtime", "allocator"})
"""States outside ``torch.cuda.memory_allocated``: the timeline does not sum them."""


@cache
def moments_in(
    phases: frozenset[Phase], backward: frozenset[Moment] | None = None
) -> frozenset[Moment]:
    """The moments of these phases; within backward only ``backward`` (None: all)."""
    return frozenset(
        m
        for m, ph in MOMENTS
        if ph in phases and (ph != "backward" or backward is None or m in backward)
    )


Formula = str | Callable[[], str]
"""A row's formula: its text, or what writes it when first read (:attr:`Row.formula`)."""


def text(formula: Formula) -> str:
    """A formula's text (written now, when it is a function)."""
    return formula if isinstance(formula, str) else formula()


class Row(NamedTuple):
    """One named amount of memory. Build it with :func:`make_row`.

    ``low`` and ``high`` are equal when the row is exact. ``group`` is the coarse
    category the chart stacks by (weights, gradients, optimizer, activations, ...);
    ``state`` is what the row belongs to, which code asks instead of the id.
    ``moments`` are the timeline moments it is live at in every step;
    ``accumulated_moments`` the further ones it is live at under gradient accumulation.

    A named tuple rather than a frozen dataclass: it is as immutable, and about four
    times cheaper to build — ``estimate()`` builds some forty rows per stage, thousands
    of times per layout search. Change a row with ``row._replace(...)``.
    """

    id: str
    label: str
    state: State
    location: Location
    kind: RowKind
    group: str
    low: int
    high: int
    formula_src: Formula
    source: str
    phases: frozenset[Phase]
    moments: frozenset[Moment]
    accumulated_moments: frozenset[Moment] = NO_MOMENTS
    scope: Scope = "rank"
    dtype: str | None = None
    checkpoint: CheckpointPart | None = None
    role: Role | None = None
    pinned: bool = False  # page-locked host memory (limited by ``ulimit -l``)

    @property
    def formula(self) -> str:
        """The formula with the numbers substituted."""
        return text(self.formula_src)

    def _key(self) -> tuple[Any, ...]:
        """The row's fields with the formula's text (what equality and pickling see)."""
        return (*self[:_FORMULA], self.formula, *self[_FORMULA + 1 :])

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Row):
            return NotImplemented
        return self._key() == other._key()

    def __ne__(self, other: object) -> bool:
        if not isinstance(other, Row):
            return NotImplemented
        return self._key() != other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __reduce__(self) -> tuple[type[Row], tuple[Any, ...]]:
        return (Row, self._key())

    @property
    def exact(self) -> bool:
        return self.low == self.high

    @property
    def mid(self) -> int:
        return (self.low + self.high) // 2

    @property
    def allocated(self) -> bool:
        """An HBM tensor that ``torch.cuda.memory_allocated`` counts."""
        return self.location == "hbm" and self.state not in NOT_ALLOCATED

    def live_in(self, phase: Phase) -> bool:
        return phase in self.phases

    def live_at(self, moment: Moment, accumulating: bool) -> bool:
        """Whether the row holds memory at ``moment`` (``accumulating``: grad_accum > 1)."""
        return moment in self.moments or (accumulating and moment in self.accumulated_moments)


_FORMULA = Row._fields.index("formula_src")


def span_row(
    *,
    id: str,
    label: str,
    state: State,
    span: tuple[int, int],
    moments: frozenset[Moment],
    formula: Formula,
    source: str,
    phases: frozenset[Phase] = ALL_PHASES,
    group: str | None = None,
    location: Location = "hbm",
    kind: RowKind = "peak",
    dtype: str | None = None,
) -> Row:
    """The row of an activation-side part: its bytes are the part's ``span`` and its life
    the part's ``moments``, handed in by the part's builder
    (:mod:`engine.ledger.activations.varying`), so the row can show nothing the sums do
    not add. ``group`` defaults to the state's name."""
    return make_row(
        id=id,
        label=label,
        state=state,
        location=location,
        kind=kind,
        group=group or state,
        low=span[0],
        high=span[1],
        formula=formula,
        source=source,
        phases=phases,
        moments=moments,
        dtype=dtype,
    )


def make_row(
    *,
    id: str,
    label: str,
    state: State,
    location: Location,
    kind: RowKind,
    group: str,
    low: int,
    high: int,
    formula: Formula,
    source: str,
    phases: frozenset[Phase] = ALL_PHASES,
    backward: frozenset[Moment] | None = None,
    moments: frozenset[Moment] | None = None,
    accumulated_moments: frozenset[Moment] = NO_MOMENTS,
    scope: Scope = "rank",
    dtype: str | None = None,
    checkpoint: CheckpointPart | None = None,
    role: Role | None = None,
    pinned: bool = False,
) -> Row:
    """The one way to build a row.

    ``moments`` default to every moment of ``phases``, narrowed within backward to
    ``backward`` when given (e.g. :data:`AT_LOSS`); pass ``moments`` only for a row whose
    life does not follow its phases (gradients). ``formula``: the text, or a function
    writing it when read (see :class:`Row`); such a function must read only values no
    later code changes (bind them as arguments, never a loop variable).
    """
    if low < 0 or high < low:
        raise ValueError(f"row {id}: need 0 ≤ low ≤ high, got {low}, {high}")
    return Row(
        id,
        label,
        state,
        location,
        kind,
        group,
        low,
        high,
        formula,
        source,
        phases,
        moments_in(phases, backward) if moments is None else moments,
        accumulated_moments,
        scope,
        dtype,
        checkpoint,
        role,
        pinned,
    )
