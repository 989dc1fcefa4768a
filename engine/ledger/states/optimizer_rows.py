"""A rank's optimizer state rows: one per state (moments, step counters, quantization
constants), each summed over the optimizer's allocations of the rank's shard (grouped
by shape and element size: allocations alike have the same states), each allocation
rounded up to the allocator's granularity.
"""

from __future__ import annotations

from functools import lru_cache, partial
from operator import mul

from engine.ledger.held import HeldTensor
from engine.ledger.precision import DTYPE_BYTES
from engine.ledger.row import Row, make_row
from engine.ledger.states.allocs import ShardContext, one_per_tensor, shard_allocs
from engine.ledger.states.optimizers import OPTIMIZER_LABELS, optimizer_source, state_allocs
from engine.ledger.states.paged import hbm_low, paged_host_rows
from engine.sections.method import OptimizerSection
from engine.units import fmt_count


def optimizer_rows(
    trainable: list[HeldTensor], opt: OptimizerSection, ctx: ShardContext
) -> list[Row]:
    """One row per optimizer state (moments, step counters, quantization constants)."""
    copies, elements = _optimizer_copies(trainable, ctx)
    return optimizer_rows_of(copies, elements, opt, ctx)


def _optimizer_copies(
    trainable: list[HeldTensor], ctx: ShardContext
) -> tuple[dict[tuple[tuple[int, ...], int], int], int]:
    """The optimizer's allocations of these tensors by (shape, element size), with how
    many of each (first appearances first), and the trainable elements."""
    # allocations of one shape and element size have the same states: each is worked
    # out once, for all their copies (first appearances keep the states' order)
    copies: dict[tuple[tuple[int, ...], int], int] = {}
    sharded = ctx.rule.optimizer
    if one_per_tensor(ctx.rule, sharded):  # the allocations are the tensors' shards
        elements = 0
        get = copies.get
        # the shape of the rank's allocation of each: ceil(d0 / N) rows of it when sharded
        for t in trainable:
            shape, g, c = t.shape, t.group, t.count
            if sharded and g != 1:
                shape = (-(-shape[0] // g), *shape[1:])
            key = (shape, DTYPE_BYTES[t.state_dtype])
            copies[key] = get(key, 0) + c
            elements += t.numel * c
    else:
        allocs = shard_allocs(trainable, sharded, ctx.rule, "state_dtype")
        for a in allocs:
            key = (a.shape, DTYPE_BYTES[a.dtype])
            copies[key] = copies.get(key, 0) + a.copies
        elements = sum(a.count_full * a.copies for a in allocs)
    return copies, elements


def optimizer_rows_of(
    copies: dict[tuple[tuple[int, ...], int], int],
    elements: int,
    opt: OptimizerSection,
    ctx: ShardContext,
) -> list[Row]:
    """:func:`optimizer_rows` of the allocations :func:`_optimizer_copies` gives. Where
    every allocation has the same states (one names tuple: Adam's moments and step at
    every nonempty shape), each state's sums are a dot product of the counts with one
    column of the states' bytes, worked out in C; otherwise state by state
    (:func:`optimizer_totals_by_state`, the reference ``test_optimizer_rows`` compares
    it with)."""
    gran = max(ctx.granularity, 1)
    table = _states_table(opt, gran)
    got = [table.get(key) or _filled(table, opt, key, gran) for key in copies]
    names = got[0][0] if got else ()
    if all([g[0] is names for g in got]):
        counts = list(copies.values())
        allocations = sum(counts)
        rounded = [sum(map(mul, counts, col)) for col in zip(*[g[1] for g in got], strict=True)]
        raw = [sum(map(mul, counts, col)) for col in zip(*[g[2] for g in got], strict=True)]
        totals = [(name, rounded[i], raw[i], allocations) for i, name in enumerate(names)]
    else:
        totals = optimizer_totals_by_state(copies, opt, gran)
    return _optimizer_rows_from(totals, elements, opt, ctx, gran)


def optimizer_totals_by_state(
    copies: dict[tuple[tuple[int, ...], int], int], opt: OptimizerSection, gran: int
) -> list[tuple[str, int, int, int]]:
    """(name, rounded bytes, raw bytes, allocations) of each optimizer state over these
    allocations, in the order the states first appear, added state by state."""
    per_state: dict[str, list[int]] = {}  # name → [rounded bytes, raw bytes, allocations]
    table = _states_table(opt, gran)
    for key, c in copies.items():
        states = table.get(key) or _filled(table, opt, key, gran)
        for name, rounded, n_bytes in zip(*states, strict=True):
            acc = per_state.get(name)
            if acc is None:
                per_state[name] = [rounded * c, n_bytes * c, c]
            else:
                acc[0] += rounded * c
                acc[1] += n_bytes * c
                acc[2] += c
    return [(name, n, raw, allocations) for name, (n, raw, allocations) in per_state.items()]


def optimizer_rows_by_state(
    copies: dict[tuple[tuple[int, ...], int], int],
    elements: int,
    opt: OptimizerSection,
    ctx: ShardContext,
) -> list[Row]:
    """:func:`optimizer_rows_of` with every state's sums added state by state
    (:func:`optimizer_totals_by_state`): its reference."""
    gran = max(ctx.granularity, 1)
    return _optimizer_rows_from(
        optimizer_totals_by_state(copies, opt, gran), elements, opt, ctx, gran
    )


def _optimizer_rows_from(
    totals: list[tuple[str, int, int, int]],
    elements: int,
    opt: OptimizerSection,
    ctx: ShardContext,
    gran: int,
) -> list[Row]:
    """One row per optimizer state of its ``totals`` (:func:`optimizer_totals_by_state`)."""
    rows = []
    share = f", sharded ÷ {ctx.group_words}" if ctx.rule.optimizer else ""
    source = optimizer_source(opt)
    for name, n, raw, allocations in totals:
        rows.append(
            make_row(
                id=f"hbm.optimizer.{name}",
                label=f"Optimizer: {OPTIMIZER_LABELS.get(name, name)}",
                state="optimizer",
                location="hbm",
                kind="persistent",
                group="optimizer",
                low=hbm_low(opt, n),
                high=n,
                formula=partial(
                    _optimizer_formula, opt.name, name, elements, share, allocations, raw, gran, n
                ),
                source=source,
                checkpoint="optimizer",
            )
        )
    return rows + paged_host_rows(opt, sum(t[1] for t in totals))


_States = tuple[tuple[str, ...], tuple[int, ...], tuple[int, ...]]
"""One allocation's optimizer states: their names (one tuple object per names, so
allocations alike compare by identity), bytes rounded up to the granularity, bytes."""

_NAMES: dict[tuple[str, ...], tuple[str, ...]] = {}
"""Each states' names tuple, one object per value (:data:`_States`)."""


@lru_cache(maxsize=64)
def _states_table(opt: OptimizerSection, gran: int) -> dict[tuple[tuple[int, ...], int], _States]:
    """:func:`_shape_states` of one optimizer and granularity by (shape, element size),
    filled as shapes come (bounded): the optimizer rows look each allocation up here by
    its plain tuple key, not hashing the optimizer section again for every one."""
    return {}


def _filled(
    table: dict[tuple[tuple[int, ...], int], _States],
    opt: OptimizerSection,
    key: tuple[tuple[int, ...], int],
    gran: int,
) -> _States:
    """:func:`_shape_states` of ``key`` (shape, element size), kept in ``table``."""
    if len(table) >= 4096:
        table.clear()
    got = table[key] = _shape_states(opt, *key, gran)
    return got


def _shape_states(opt: OptimizerSection, shape: tuple[int, ...], size: int, gran: int) -> _States:
    """(names, bytes rounded up to ``gran``, bytes) of :func:`state_allocs` of one
    allocation: shard shapes recur across a layout search's shard group sizes (a norm's
    weight, a divisible projection), so each is worked out once (:func:`_states_table`)."""
    allocs = state_allocs(opt, shape, size)
    names = tuple([name for name, _ in allocs])
    names = _NAMES.setdefault(names, names)
    return names, tuple([-(-n // gran) * gran for _, n in allocs]), tuple([n for _, n in allocs])


def _optimizer_formula(
    opt: str, name: str, elements: int, share: str, allocations: int, raw: int, gran: int, n: int
) -> str:
    return (
        f"{opt} state '{name}' over {fmt_count(elements)}"
        f" trainable elements{share}: {allocations} allocation(s) totalling "
        f"{fmt_count(raw)} B, each rounded up to {gran} B = {fmt_count(n)} B"
    )
