"""The optimizer rows' sums worked out as dot products of the allocations' counts with
the states' bytes (where every allocation has the same states) must equal the state by
state sums: :func:`~engine.ledger.states.optimizer_rows.optimizer_rows_of` against
:func:`~engine.ledger.states.optimizer_rows.optimizer_rows_by_state`, every field and
the formula written, on random allocations (empty shards, 8-bit thresholds, factored
and unfactored Adafactor shapes, mixed element sizes) for every optimizer and several
granularities and strategies."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from engine.ledger.states.allocs import ShardContext
from engine.ledger.states.optimizer_rows import optimizer_rows_by_state, optimizer_rows_of
from engine.sections.method import OptimizerSection
from engine.stacks.families import rule_of
from tests.engine.ledger.state_cases import written

_OPTIMIZERS = ["adamw", "adam8bit", "adafactor", "sgd_momentum", "lion", "sgd"]

_shapes = st.lists(st.integers(0, 5000), min_size=1, max_size=3).map(tuple)
_copies = st.dictionaries(
    st.tuples(_shapes, st.sampled_from([1, 2, 4])), st.integers(1, 64), max_size=12
)


@settings(max_examples=300, deadline=None)
@given(
    _copies,
    st.integers(0, 10**9),
    st.sampled_from(_OPTIMIZERS),
    st.sampled_from([0, 1, 512, 4096]),
    st.sampled_from(["fsdp2", "ddp", "zero3"]),
)
def test_dot_products_equal_state_by_state(
    copies: dict[tuple[tuple[int, ...], int], int],
    elements: int,
    name: str,
    gran: int,
    strategy: str,
) -> None:
    opt = OptimizerSection(name=name)  # type: ignore[arg-type]
    ctx = ShardContext(rule_of(strategy), "8 (data-parallel shard group)", gran)
    fast = optimizer_rows_of(copies, elements, opt, ctx)
    assert written(fast) == written(optimizer_rows_by_state(copies, elements, opt, ctx))


def test_adam_takes_the_dot_products() -> None:
    """Adam's allocations (nonempty) share one names tuple: the case the search meets."""
    opt = OptimizerSection(name="adamw")
    ctx = ShardContext(rule_of("fsdp2"), "8 (data-parallel shard group)", 512)
    copies = {((7, 3), 4): 2, ((5,), 4): 3, ((1, 1), 2): 1}
    rows = optimizer_rows_of(copies, 100, opt, ctx)
    assert [r.id for r in rows] == [
        "hbm.optimizer.exp_avg",
        "hbm.optimizer.exp_avg_sq",
        "hbm.optimizer.step",
    ]
    assert rows[0].high == (512 * 2 + 512 * 3 + 512) and written(rows) == written(
        optimizer_rows_by_state(copies, 100, opt, ctx)
    )
