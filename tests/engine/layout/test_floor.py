"""The search's floor: too few ranks to hold the model states at all.

Llama-3.1-8B under FSDP2 (autocast, AdamW): one GPU holds 8,030,261,248 fp32 weights,
fp32 gradients and two fp32 moments (16 B each: 128,484,179,968 B) plus the step
counters and per-tensor rounding; the limit is 84,932,558,848 × 0.9 = 76,439,302,963 B,
so at least ⌈128.5 GB ÷ 76.4 GB⌉ = 2 ranks. Soundness: every layout of any world w has
a rank holding at least the one-GPU total ÷ w (sharding only divides, copies only add).
"""

from __future__ import annotations

import pytest

from engine.estimate import estimate
from engine.layout.proofs.bound import STATE_GROUPS, fewest_ranks
from engine.plan import Plan, default_plan, with_values
from engine.presets import plan_for_model_preset


def _states(plan: Plan) -> int:
    """A rank's persistent model-state bytes (low) on the heaviest stage."""
    st = estimate(plan).heaviest
    return sum(
        r.low
        for r in st.rows
        if r.location == "hbm" and r.kind == "persistent" and r.group in STATE_GROUPS
    )


def test_the_8b_floor_by_hand() -> None:
    assert fewest_ranks(default_plan()) == 2
    one = with_values(default_plan(), {"parallelism.dp": 1})
    assert _states(one) > one.hbm_limit_bytes  # one rank cannot fit, as the floor says


LAYOUTS = [
    {"parallelism.dp": 8},
    {"parallelism.tp": 2, "parallelism.dp": 4},
    {"parallelism.pp": 4, "parallelism.dp": 2, "batch.grad_accum": 4},
    {"parallelism.ep": 8, "parallelism.dp": 8},
    {"parallelism.tp": 2, "parallelism.ep": 4, "parallelism.dp": 4, "parallelism.pp": 2},
]


@pytest.mark.parametrize(
    "change", LAYOUTS, ids=lambda c: ",".join(f"{k}={v}" for k, v in c.items())
)
@pytest.mark.parametrize("strategy", ["fsdp2", "megatron_distopt", "zero1"])
def test_no_layout_holds_less_than_the_floor_share(change: dict[str, int], strategy: str) -> None:
    """Mixtral-8x7B: the heaviest rank's states × world ≥ the one-GPU states, so a world
    below fewest_ranks cannot fit."""
    base = with_values(plan_for_model_preset("mixtral-8x7b"), {"parallelism.strategy": strategy})
    plan = with_values(base, change)
    one = with_values(
        base, {"parallelism.dp": 1, "parallelism.ep": 1, "parallelism.tp": 1, "parallelism.pp": 1}
    )
    total = _states(one)
    assert _states(plan) * plan.parallelism.world_size >= total
    assert fewest_ranks(plan) == -(-total // plan.hbm_limit_bytes)
