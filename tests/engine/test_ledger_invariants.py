"""Invariants every estimate keeps, whatever the plan: unique row ids, a formula and a
known source on every row, and phase totals consistent with the rows."""

from __future__ import annotations

from typing import Any

import pytest

from engine.errors import PlanError
from engine.estimate import estimate
from engine.legality.stack import dimension_problems, stack_problems
from engine.plan import default_plan, with_values
from engine.sections.parallel import Strategy
from engine.sources import all_sources
from engine.stacks.catalog import concrete_stack

STRATEGIES: list[Strategy] = [
    "ddp",
    "zero1",
    "zero2",
    "zero3",
    "fsdp1_full_shard",
    "fsdp1_shard_grad_op",
    "fsdp1_no_shard",
    "fsdp1_hybrid_shard",
    "fsdp1_hybrid_shard_zero2",
    "fsdp2",
    "fsdp2_hsdp",
    "megatron_distopt",
]
VARIANTS: list[dict[str, Any]] = [
    {},
    {"method.kind": "lora"},
    {"method.kind": "qlora"},
    {"parallelism.pp": 2, "parallelism.dp": 4},
    {"method.recompute.policy": "full", "batch.grad_accum": 4},
]


@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("variant", VARIANTS, ids=lambda v: ",".join(v) or "default")
def test_rows_are_unique_sourced_and_sum_up(strategy: str, variant: dict[str, Any]) -> None:
    plan = with_values(default_plan(), {"parallelism.strategy": strategy, **variant})
    refused = stack_problems(plan.stack.name, plan.parallelism.strategy, plan.method.kind)
    if refused:  # the Megatron distributed optimizer runs on Megatron-Core: no peft
        with pytest.raises(PlanError, match="method.kind"):
            estimate(plan)
        return
    stack = concrete_stack(plan.stack.name, plan.parallelism.strategy, plan.method.kind)
    if dimension_problems(stack, plan.parallelism.strategy, "pp", plan.parallelism.pp):
        with pytest.raises(PlanError, match="cannot run:"):
            estimate(plan)
        return
    est = estimate(plan)
    sources = all_sources()
    for st in est.stages:
        ids = [r.id for r in st.rows]
        assert len(ids) == len(set(ids)), sorted(i for i in ids if ids.count(i) > 1)
        for r in st.rows:
            assert r.formula and r.label, r.id
            assert r.source in sources, (r.id, r.source)
        # the peak: the peak phase's high, and the largest low of any phase (a rank's
        # peak holds at least what any moment holds at least)
        assert st.peak.high == st.phases[st.peak_phase].high
        assert st.peak.low == max(r.low for r in st.phases.values())
        assert st.peak.low >= st.phases[st.peak_phase].low
        assert st.peak.low <= st.reserved_peak.low <= st.device_peak.low
        assert st.peak.high <= st.reserved_peak.high <= st.device_peak.high
    for r in (*est.nodes.host, *est.nodes.nvme, *est.nodes.checkpoint):
        assert r.source in sources, (r.id, r.source)
    node_ids = [r.id for r in est.nodes.host]
    assert len(node_ids) == len(set(node_ids))


@pytest.mark.parametrize("schedule", ["1f1b", "interleaved_1f1b", "gpipe"])
@pytest.mark.parametrize("pp", [3, 4, 8])
def test_decisive_stages_decide_like_all_stages(schedule: str, pp: int) -> None:
    """Computing only the first, the first middle and the last stage gives the same
    heaviest stage, fit peak and verdict as computing every stage (balanced split, any
    schedule): the first middle stage dominates the later ones."""
    changes: dict[str, Any] = {
        "parallelism.pp": pp,
        "parallelism.dp": 1,
        "parallelism.pp_schedule": schedule,
    }
    if schedule == "interleaved_1f1b":
        changes["parallelism.virtual_stages"] = 2
        if 32 % (pp * 2):
            pytest.skip("32 layers do not split into pp × 2 virtual chunks")

    plan = with_values(default_plan(), changes)
    full, fast = estimate(plan), estimate(plan, decisive_only=True)
    assert [s.stage for s in fast.stages] == sorted({0, 1, pp - 1})
    assert fast.heaviest_stage == full.heaviest_stage
    assert fast.fit_peak == full.fit_peak and fast.verdict == full.verdict
    assert max(s.fit_peak.high for s in full.stages) == full.fit_peak.high
