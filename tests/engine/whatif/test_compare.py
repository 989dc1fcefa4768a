"""Comparing plans: rows matched by id with deltas against the baseline, the inputs that
differ by field path, sides that cannot be computed, and the shared summary words."""

from __future__ import annotations

import pytest

import engine.analysis as an
from engine.estimate import estimate
from engine.plan import default_plan, with_value, with_values
from engine.whatif.compare import (
    ABSENT,
    SUMMARY_FIGURES,
    compare,
    delta_text,
    input_differences,
    ledger_rows,
    signed_size,
    summary,
)


def test_a_plan_against_itself_differs_nowhere() -> None:
    plan = default_plan()
    c = compare([("a", plan), ("b", plan)], with_counts=False)
    assert c.inputs == () and c.changed_rows == ()
    assert len(c.rows) == len(ledger_rows(estimate(plan)))
    assert all(r.delta(1) == (0, 0) for r in c.rows)


def test_rows_are_matched_by_id_with_deltas_against_the_baseline() -> None:
    """Doubling the sequence: every row's delta is the difference of the two estimates'
    rows of the same id (low and high separately); rows of the same size drop out of the
    changed list, which is ordered by the largest change."""
    a = default_plan()
    b = with_value(a, "batch.seq_len", 8192)
    c = compare([("a", a), ("b", b)], with_counts=False)
    ea = {r.id: r for r in ledger_rows(estimate(a))}
    eb = {r.id: r for r in ledger_rows(estimate(b))}
    for r in c.rows:
        ra, rb = ea.get(r.id), eb.get(r.id)
        base = (ra.low, ra.high) if ra else (0, 0)
        got = (rb.low, rb.high) if rb else (0, 0)
        assert r.delta(1) == (got[0] - base[0], got[1] - base[1])
    changed = c.changed_rows
    assert changed and all(r.differs for r in changed)
    assert [r.largest_change for r in changed] == sorted(
        (r.largest_change for r in changed), reverse=True
    )
    assert "hbm.weights" not in {r.id for r in changed}  # weights do not grow with tokens
    assert [d.path for d in c.inputs] == ["batch.seq_len"]
    assert c.inputs[0].values == (4096, 8192)


def test_rows_one_plan_lacks_are_absent_and_count_as_zero() -> None:
    """LoRA freezes the base weights: ``hbm.weights.frozen`` exists only in the LoRA plan
    and ``hbm.weights`` only in the full one; the delta of an absent row is its whole size."""
    a = default_plan()
    b = with_value(a, "method.kind", "lora")
    c = compare([("full", a), ("lora", b)], with_counts=False)
    rows = {r.id: r for r in c.rows}
    frozen = rows["hbm.weights.frozen"]
    assert frozen.values[0] is None and frozen.values[1] is not None
    assert frozen.delta(1) == frozen.values[1]
    weights = rows["hbm.weights"]
    assert weights.values[1] is None
    assert weights.delta(1) == (-weights.values[0][0], -weights.values[0][1])  # type: ignore[index]


def test_input_differences_by_leaf_path_and_absent_branches() -> None:
    """Two leaves of a range differ separately; a MoE block present in one plan only
    is ``absent`` in the other, leaf by leaf."""
    a = default_plan()
    b = with_values(a, {"runtime.allocator_reserve": {"low": 0.11, "high": 0.3}})
    assert [(d.path, d.values) for d in input_differences([a, b])] == [
        ("runtime.allocator_reserve.high", (0.36, 0.3))
    ]
    from engine.cli.common import with_model

    moe = with_model(a, "mixtral-8x7b")
    diffs = {d.path: d.values for d in input_differences([a, moe])}
    assert diffs["model.architecture.moe"][0] is None
    assert diffs["model.architecture.moe"][1] is ABSENT
    assert diffs["model.architecture.moe.num_experts"] == (ABSENT, 8)


def test_a_plan_that_cannot_be_computed_is_a_side_with_its_reason() -> None:
    """TP 3 cannot split 32 heads: that side has the engine's reason, no estimate, and its
    rows are absent throughout; the other side still compares."""
    a = default_plan()
    bad = with_value(a, "parallelism.tp", 3)
    c = compare([("a", a), ("bad", bad)])
    side = c.sides[1]
    assert side.estimate is None and side.error and "heads" in side.error
    assert all(r.values[1] is None for r in c.rows)
    assert summary(side)["Verdict"].startswith("cannot be computed")
    assert c.sides[0].counts is not None  # the baseline still has its counts


def test_counts_come_from_the_shared_analysis() -> None:
    """With counts, each side's GPU counts are engine.analysis's (what the window shows)."""
    plan = with_value(default_plan(), "policy.max_gpus", 64)
    other = with_value(plan, "batch.seq_len", 8192)
    c = compare([("a", plan), ("b", other)])
    assert c.sides[0].counts is an.analysis(plan).counts
    assert c.sides[1].counts is an.analysis(other).counts
    words = summary(c.sides[0], "gb")
    assert list(words) == list(SUMMARY_FIGURES)
    k = an.analysis(plan).counts
    assert words["Procure (first legal layout)"].startswith(f"{k.first_layout.gpus}")
    assert words["Verdict"] == "FITS"


def test_progress_can_stop_a_comparison() -> None:
    plans = [
        (str(i), with_value(default_plan(), "batch.seq_len", 1024 * (i + 1))) for i in range(3)
    ]
    c = compare(plans, with_counts=False, progress=lambda done, total: done < 2)
    assert c.cancelled and len(c.sides) == 2


def test_needs_two_plans() -> None:
    with pytest.raises(ValueError, match="at least two"):
        compare([("a", default_plan())])


def test_signed_sizes() -> None:
    """1.5·10⁹ B is +1.50 GB; a shrink is −; equal is ±0."""
    assert signed_size(1_500_000_000, "gb") == "+1.50 GB"
    assert signed_size(-500_000_000, "gb") == "−0.50 GB"
    assert signed_size(0) == "±0"
    plan = default_plan()
    c = compare([("a", plan), ("b", with_value(plan, "batch.seq_len", 8192))], with_counts=False)
    weights = next(r for r in c.rows if r.id == "hbm.weights")
    assert delta_text(weights, 1) == "±0"
