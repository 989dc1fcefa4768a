"""The fewest ranks that could hold a plan's model states at all: a sound floor for the
GPU-count search.

Every byte of the weights, gradients and optimizer state lives in some rank's HBM when
nothing is offloaded, and sharding only divides tensors (rounding each shard up) while
TP, EP, PP and replication only add copies: summed over the ranks of any layout, the
persistent states are at least what one rank holds when the plan runs on one GPU. So a
layout of ``w`` ranks has some rank holding at least that total ÷ ``w``; when that is
over the HBM limit, no layout of ``w`` ranks fits, by either estimate, and the search
need not estimate a single layout below that. It reads the ledger's state rows (a
proof): a new state row must keep it below every layout's
(``tests/engine/layout/test_floor.py::test_no_layout_holds_less_than_the_floor_share``).
"""

from __future__ import annotations

from functools import lru_cache

from engine.ledger.states.persistent import all_state_rows
from engine.plan import Plan
from engine.stacks.defaults import resolved

STATE_GROUPS = frozenset({"weights", "gradients", "optimizer"})
RESIDENT_GROUPS = frozenset({"weights", "optimizer"})


def _one_gpu(plan: Plan, pp: int = 1, split: tuple[int, ...] | None = None) -> Plan:
    """The plan on one rank (no TP, PP, CP, EP or DP; no explicit split), or on one
    rank per stage of a ``pp``-stage pipeline split as ``split``."""
    par = plan.parallelism.model_copy(
        update={
            "tp": 1,
            "pp": pp,
            "cp": 1,
            "ep": 1,
            "dp": 1,
            "expert_tp": 1,
            "virtual_stages": 1,
            "pp_layer_split": split,
            "pp_layout": None,
            "shard_group_size": None,
        }
    )
    return plan.model_copy(update={"parallelism": par})


def _states(one: Plan, stage: int, groups: frozenset[str]) -> int:
    """Bytes (low) of one rank's persistent HBM rows of ``groups`` on ``stage``."""
    return sum(
        r.low
        for r in all_state_rows(one, stage)
        if r.location == "hbm" and r.kind == "persistent" and r.group in groups
    )


def _offloaded(plan: Plan) -> bool:
    off = plan.offload
    return off.params != "none" or off.optimizer != "none"


@lru_cache(maxsize=256)
def fewest_ranks(plan: Plan) -> int:
    """The smallest world size whose average share of the model states fits the HBM
    limit (1 when something is offloaded: offload moves states off HBM, so the floor
    would not hold)."""
    if _offloaded(plan):
        return 1
    total = _states(resolved(_one_gpu(plan)), 0, STATE_GROUPS)
    limit = plan.hbm_limit_bytes
    return max(1, -(-total // limit)) if limit > 0 else 1


@lru_cache(maxsize=1024)
def resident_states(plan: Plan, pp: int, split: tuple[int, ...] | None) -> tuple[int, ...]:
    """Per stage of a ``pp``-stage pipeline split as ``split``, the bytes of weights and
    optimizer state one rank holds when each stage runs on one rank — the states live
    at every moment of the step (gradients are not: made in backward, freed after the
    step). The w ÷ pp ranks of a stage in any layout of w ranks hold at least that
    much between them (the floor's argument), so one of them holds its share; all 0
    when something is offloaded."""
    if _offloaded(plan):
        return (0,) * pp
    one = resolved(_one_gpu(plan, pp, split))
    return tuple(_states(one, s, RESIDENT_GROUPS) for s in range(pp))
