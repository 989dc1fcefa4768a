"""The fewest ranks that could hold a plan's model states at all: a sound floor for the
GPU-count search.

Every byte of the weights, gradients and optimizer state lives in some rank's HBM when
nothing is offloaded, and sharding only divides tensors (rounding each shard up) while
TP, EP, PP and replication only add copies: summed over the ranks of any layout, the
persistent states are at least what one rank holds when the plan runs on one GPU. So a
layout of ``w`` ranks has some rank holding at least that total ÷ ``w``; when that is
over the HBM limit, no layout of ``w`` ranks fits, by either estimate. DeepSeek-V3
(671 B parameters, 18 B each under the distributed optimizer) cannot fit fewer than ~160
H100s, and the search need not estimate a single layout below that.
"""

from __future__ import annotations

from functools import lru_cache

from engine.ledger.states.persistent import all_state_rows
from engine.plan import Plan
from engine.stacks.defaults import resolved

STATE_GROUPS = frozenset({"weights", "gradients", "optimizer"})


def _one_gpu(plan: Plan) -> Plan:
    """The plan on one rank (no TP, PP, CP, EP or DP; no explicit split)."""
    par = plan.parallelism.model_copy(
        update={
            "tp": 1,
            "pp": 1,
            "cp": 1,
            "ep": 1,
            "dp": 1,
            "expert_tp": 1,
            "virtual_stages": 1,
            "pp_layer_split": None,
            "pp_layout": None,
            "shard_group_size": None,
        }
    )
    return plan.model_copy(update={"parallelism": par})


@lru_cache(maxsize=256)
def fewest_ranks(plan: Plan) -> int:
    """The smallest world size whose average share of the model states fits the HBM
    limit (1 when something is offloaded: offload moves states off HBM, so the floor
    would not hold)."""
    off = plan.offload
    if off.params != "none" or off.optimizer != "none":
        return 1
    one = resolved(_one_gpu(plan))
    total = sum(
        r.low
        for r in all_state_rows(one, 0)
        if r.location == "hbm" and r.kind == "persistent" and r.group in STATE_GROUPS
    )
    limit = plan.hbm_limit_bytes
    return max(1, -(-total // limit)) if limit > 0 else 1
