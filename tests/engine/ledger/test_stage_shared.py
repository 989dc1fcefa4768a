"""Shared rows made once for plans whose DP and CP differ but shard alike must not
change a byte or a word.

:mod:`engine.ledger.stage_shared` builds a stage's shared rows but the checkpoint
event's and the runtime's once per placement and pair of shard group sizes, from the
plan at DP 1 and CP 1, and adds each plan's own last rows. Here plans that differ only
in how their DP × CP ranks split (DP 4; DP 2 × CP 2; DP 1 × CP 4: the later ones
answered from the part the first one filled), with hybrid shard groups and node sizes
that make shard groups coincide, under sharded and consolidated checkpoints, are
estimated one after another, and every stage is compared with the from-scratch assembly
built from the plan itself (``test_estimate_folding``'s unfolded rows, formulas
included; moment and phase sums; peak moments), as are the layout search's
:func:`~engine.ledger.stage_rows.shared_rows`.
"""

from __future__ import annotations

from typing import Any

import test_estimate_folding as folding
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from engine.errors import PlanError
from engine.estimate import estimate
from engine.ledger.phases import moment_sums
from engine.ledger.stage_rows import shared_rows
from engine.plan import Plan, with_values
from engine.presets import plan_for_model_preset
from engine.stacks.defaults import resolved

SPLITS: tuple[tuple[int, int], ...] = ((4, 1), (2, 2), (1, 4))
"""(DP, CP) of four ranks per stage: the dense shard group is four in each."""


def _check(plan: Plan) -> bool:
    """Estimate ``plan`` and compare it with the from-scratch assembly; False when the
    plan cannot run (nothing to compare)."""
    try:
        est = estimate(plan)
    except PlanError:
        return False
    folding._assert_unfolded(plan, est)
    r = resolved(plan)
    for st_ in range(r.parallelism.pp):
        sh = shared_rows(r, st_)
        want = folding._unfolded_rows(r, st_)
        rows = [*sh.head, *sh.tail]
        assert all(x in want for x in rows)
        assert sh.sums == moment_sums(rows, r.batch.grad_accum > 1)
    return True


CHECKPOINTS: tuple[tuple[str, str], ...] = (
    ("sharded", "host"),
    ("consolidated_rank0", "gpu"),
    ("consolidated_rank0", "host"),
    ("consolidated_every_rank", "gpu"),
)
"""Checkpoint (format, staging): a consolidated one's event reads every rank's state."""


def _variants(
    plan: Plan, strategy: str, rpn: int | None, checkpoint: tuple[str, str] = CHECKPOINTS[0]
) -> list[Plan]:
    out = []
    for dp, cp in SPLITS:
        changes: dict[str, Any] = {
            "parallelism.strategy": strategy,
            "parallelism.dp": dp,
            "parallelism.cp": cp,
            "parallelism.ranks_per_node": rpn,
            "batch.seq_len": 8,
            "checkpoint.format": checkpoint[0],
            "checkpoint.staging": checkpoint[1],
        }
        try:
            out.append(with_values(plan, changes))
        except (PlanError, ValueError):
            continue
    return out


@settings(max_examples=50, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    folding.pipelined(),
    st.sampled_from(["fsdp2", "fsdp2_hsdp", "zero3", "zero1", "megatron_distopt", "ddp"]),
    st.sampled_from([None, 2, 4, 8]),
    st.sampled_from(CHECKPOINTS),
)
def test_dp_cp_splits_equal_the_unfolded_assembly(
    plan: Plan, strategy: str, rpn: int | None, checkpoint: tuple[str, str]
) -> None:
    checked = sum(_check(p) for p in _variants(plan, strategy, rpn, checkpoint))
    assume(checked > 0)


def test_moe_presets_at_dp_cp_splits() -> None:
    """DeepSeek-V3 and Maverick (routed experts shard over their own group) at each
    split, FSDP2 and hybrid, one stage and several."""
    for name in ("deepseek-v3", "llama-4-maverick"):
        base = plan_for_model_preset(name)
        for strategy, pp, ep, ck in (
            ("fsdp2", 1, 2, CHECKPOINTS[0]),
            ("fsdp2_hsdp", 2, 4, CHECKPOINTS[1]),
            ("fsdp2", 4, 1, CHECKPOINTS[3]),
        ):
            plan = with_values(base, {"parallelism.pp": pp, "parallelism.ep": ep})
            variants = _variants(plan, strategy, None, ck)
            assert variants
            assert any([_check(p) for p in variants])
