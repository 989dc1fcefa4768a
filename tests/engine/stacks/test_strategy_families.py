"""The strategy table: families, what each strategy shards, and the knobs it reads."""

from __future__ import annotations

from typing import Any, get_args

import pytest

from engine.estimate import estimate
from engine.plan import Plan, default_plan, with_values
from engine.sections.parallel import Strategy, StrategyKnobs
from engine.stacks.applicability import no_effect
from engine.stacks.families import FAMILIES, STRATEGIES, family_of, keeps_all_gathered


def test_every_strategy_has_one_row_and_a_known_family() -> None:
    assert set(STRATEGIES) == set(get_args(Strategy))
    assert {r.family for r in STRATEGIES.values()} == set(FAMILIES)


def test_families_and_stages_match_the_frameworks() -> None:
    """ZeRO-1/2/3 are DeepSpeed's stages 1–3 (ZeRO paper §5); FSDP1 SHARD_GRAD_OP and
    _HYBRID_SHARD_ZERO2 shard like ZeRO-2 (torch.distributed.fsdp.ShardingStrategy docs);
    FULL_SHARD / fully_shard like ZeRO-3; NO_SHARD like DDP; Megatron's distributed
    optimizer shards the optimizer only (ZeRO-1)."""
    stages = {s: r.zero_stage for s, r in STRATEGIES.items()}
    assert stages == {
        "ddp": 0,
        "zero1": 1,
        "zero2": 2,
        "zero3": 3,
        "fsdp1_full_shard": 3,
        "fsdp1_shard_grad_op": 2,
        "fsdp1_no_shard": 0,
        "fsdp1_hybrid_shard": 3,
        "fsdp1_hybrid_shard_zero2": 2,
        "fsdp2": 3,
        "fsdp2_hsdp": 3,
        "megatron_distopt": 1,
    }
    assert {s for s in STRATEGIES if family_of(s) == "deepspeed"} == {"zero1", "zero2", "zero3"}
    assert {s for s, r in STRATEGIES.items() if r.hybrid} == {
        "fsdp1_hybrid_shard",
        "fsdp1_hybrid_shard_zero2",
        "fsdp2_hsdp",
    }


def test_units_stay_gathered_under_shard_grad_op_and_fsdp2_without_reshard() -> None:
    plan = default_plan()
    assert not keeps_all_gathered(plan.parallelism)
    no_reshard = with_values(plan, {"parallelism.knobs.fsdp_reshard_after_forward": False})
    assert keeps_all_gathered(no_reshard.parallelism)
    sgo = with_values(plan, {"parallelism.strategy": "fsdp1_shard_grad_op"})
    assert keeps_all_gathered(sgo.parallelism)
    zero3 = with_values(
        plan,
        {
            "parallelism.strategy": "zero3",
            "parallelism.knobs.fsdp_reshard_after_forward": False,
        },
    )
    assert not keeps_all_gathered(zero3.parallelism)  # an FSDP2 knob: no effect on ZeRO-3


ALTERNATIVES: dict[str, list[Any]] = {
    "fsdp_reshard_after_forward": [False, 2],
    "fsdp_prefetch_units": [3],
    "fsdp1_limit_all_gathers": [False],
    "fsdp1_backward_prefetch": ["none"],
    "fsdp1_sync_module_states": [True, False],
    "ds_prefetch_bucket_elements": [10**9],
    "ds_max_live_parameters": [10**6],
    "ds_max_reuse_distance": [5],
    "ds_param_persistence_threshold": [10**9],
    "ds_reduce_bucket_elements": [1000],
    "ds_allgather_bucket_elements": [1000],
    "ds_overlap_comm": [True, False],
    "accumulate_without_sync": [True],
    "ddp_bucket_cap_mb": [1.0],
}


def _figures(plan: Plan) -> list[tuple[str, int, int]]:
    est = estimate(plan)
    return [(r.label, r.low, r.high) for st in est.stages for r in st.rows]


def test_every_knob_has_alternatives_listed() -> None:
    assert set(ALTERNATIVES) == set(StrategyKnobs.model_fields)


@pytest.mark.parametrize("strategy", sorted(STRATEGIES))
def test_a_knob_said_to_have_no_effect_has_none(strategy: str) -> None:
    """For every strategy, each knob the applicability table calls idle leaves every row
    unchanged whatever its value."""
    dp = 16 if STRATEGIES[strategy].hybrid else 8  # type: ignore[index]
    plan = with_values(default_plan(), {"parallelism.strategy": strategy, "parallelism.dp": dp})
    idle = no_effect(plan)
    base = _figures(plan)
    checked = 0
    for knob, values in ALTERNATIVES.items():
        path = f"parallelism.knobs.{knob}"
        if not any(e.covers(path) for e in idle):
            continue
        for value in values:
            assert _figures(with_values(plan, {path: value})) == base, (path, value)
            checked += 1
    assert checked > 0
