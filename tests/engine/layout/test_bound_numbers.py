"""The peak floor's activation sums are the sums of the rows they stand for.

``engine/layout/proofs/bound.py`` sums a stage's activation parts without building a
row (:func:`~engine.layout.proofs.bound.activation_sums`); the floor's soundness argument
is about the rows (:func:`~engine.ledger.activations.rows.activation_rows` placing no
tensors, summed by :func:`~engine.ledger.phases.moment_sums`). The two must be equal,
moment by moment, low and high: on random small plans over every legal layout of a
random world size, every stage, and on the real models of ``layout_plans``. A part
whose ``allocated`` flag or live moments disagreed with its row's, or a row left out of
the numbers, fails here; so does a moment outside every phase (the floor reads the peak
phase's high as the largest moment's).
"""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from layout_plans import legal_layouts, preset_plans, search_plans

from engine.errors import PlanError
from engine.layout.proofs.bound import activation_sums
from engine.layout.shapes import with_layout
from engine.ledger.activations.rows import activation_rows
from engine.ledger.phases import moment_sums, timeline_of
from engine.ledger.placement import stage_layer_ranges
from engine.plan import Plan
from engine.stacks.defaults import resolved


def _compare(plan: Plan, world: int) -> int:
    """Assert numbers equal rows' sums on every stage of every legal layout of ``world``
    GPUs that lays out; how many stages were compared."""
    compared = 0
    for lay in legal_layouts(plan, world).legal:
        try:
            laid = resolved(with_layout(plan, lay))
            ranges = stage_layer_ranges(laid.model.architecture, laid.parallelism)
        except (PlanError, ValueError, NotImplementedError):
            continue
        acc = laid.batch.grad_accum > 1
        for s, layers in enumerate(ranges):
            try:
                rows = activation_rows(laid, s, len(layers), ())
            except (PlanError, NotImplementedError):
                continue
            sums = activation_sums(laid, s, len(layers), acc)
            assert sums == moment_sums(rows, acc), (lay, s)
            # the floor takes the largest moment's high for the peak phase's: every
            # moment is some phase's
            peak = max(r.high for r in timeline_of(sums).phases.values())
            assert peak == max(high for _, high in sums), (lay, s)
            compared += 1
    return compared


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(search_plans(), st.integers(1, 16))
def test_activation_sums_equal_the_rows_sums(case: tuple[Plan, int], world: int) -> None:
    plan, _ = case
    _compare(plan, world)


def test_activation_sums_equal_the_rows_sums_on_presets() -> None:
    """The same on real models (dense, MoE with EP, MLA, offload), every layout of 8 GPUs."""
    assert sum(_compare(plan, 8) for plan in preset_plans()) > 0
