"""The DP regimes (``engine/layout/proofs/regimes.py``): within one, a rank's peak never rises
with DP (up to the FSDP padding slack), which the search's pruning rests on."""

from __future__ import annotations

from dataclasses import replace

from layout_plans import TINY_MOE

from engine.estimate import estimate
from engine.layout.candidates import ShapeJudge
from engine.layout.point import Layout
from engine.layout.shapes import with_layout
from engine.plan import default_plan, with_values


def test_hsdp_experts_shard_group_splits_regimes() -> None:
    """HSDP shards each group over the largest divisor of its ranks within a node: on
    2-GPU nodes with EP 2, DP 4 gives 2 expert DP ranks (shard group 2) and DP 6 gives 3
    (shard group 1, experts whole), so the rank at DP 6 holds more than at DP 4 — the
    two must not share a regime, though the dense shard group (2) is the same."""
    plan = with_values(
        default_plan(),
        {
            "model.architecture": TINY_MOE,
            "batch.seq_len": 1024,
            "batch.micro_batch": 1,
            "parallelism.dp": 1,
            "parallelism.strategy": "fsdp2_hsdp",
            "method.recompute.policy": "none",
            "hardware.gpus_per_node": 2,
            "hardware.usable_hbm_bytes": 2_500_000_000,
        },
    )
    four = Layout(tp=1, pp=1, cp=1, ep=2, dp=4)
    six = replace(four, dp=6)
    peak = {
        lay.dp: estimate(with_layout(plan, lay), decisive_only=True).fit_peak.high
        for lay in (four, six)
    }
    assert peak[6] > peak[4]
    judge = ShapeJudge(plan, replace(four, dp=1), 1.0)
    assert judge.regime(4) != judge.regime(6)
    assert judge.regime(6) == judge.regime(10)  # shard group 1 again
