"""Megatron-Core's MoE parallel folding: expert TP × EP × expert DP over TP × CP × DP.

Follows ``megatron/core/parallel_state.py`` ``initialize_model_parallel`` (expert data
parallel = world ÷ (expert TP × EP × PP)) and ``megatron/training/
theoretical_memory_usage.py`` ``compute_weight_and_optimizer_memory`` (routed experts
sharded by expert TP × EP, their distributed-optimizer state by expert DP), checked on
the shape of Megatron's own test ``test_weight_and_optimizer_memory.py``
``test_weight_and_optimizer_memory_accounts_for_expert_parallelism`` (TP2 PP2 ETP4 EP2 on
64 ranks: DP 16, expert DP 4).
"""

from __future__ import annotations

from ledger_plans import TINY_MOE

from engine.estimate import estimate
from engine.ledger.states.persistent import stage_held
from engine.plan import default_plan, with_values
from engine.presets import plan_for_model_preset
from engine.stacks.defaults import resolved

DENSE_FIRST_MOE = {**TINY_MOE, "moe": {**TINY_MOE["moe"], "first_dense_layers": 1}}
"""The shared tiny Mixtral with its first layer dense (layer 1 routed)."""


def test_expert_groups_follow_megatron_folding() -> None:
    """TP 2, PP 2, DP 16 (world 64), EP 2, expert TP 4. A stage has 2 × 16 = 32 ranks;
    regrouped for the experts as ETP 4 × EP 2 × EDP 4 (64 ÷ (4 × 2 × 2) = 4, Megatron's
    figure). Stage 1 holds the MoE layer: EP 2 leaves 4 ÷ 2 = 2 experts per rank, and
    expert TP 4 splits each of their gate/up (16, 8) → (4, 8) and down (8, 16) → (8, 4):
    2 experts × 3 × 32 = 192 elements = 4 × 3 × 8 × 16 ÷ (ETP 4 × EP 2), each sharded over
    the expert DP group of 4; dense tensors over the dense DP group of 16."""
    plan = with_values(
        default_plan(),
        {
            "model.architecture": DENSE_FIRST_MOE,
            "batch.seq_len": 4,
            "parallelism.tp": 2,
            "parallelism.pp": 2,
            "parallelism.dp": 16,
            "parallelism.ep": 2,
            "parallelism.expert_tp": 4,
            "parallelism.strategy": "megatron_distopt",
        },
    )
    assert plan.parallelism.world_size == 64 and plan.parallelism.expert_dp == 4
    held, _ = stage_held(resolved(plan), 1)
    experts = [t for t in held if ".experts." in t.name]
    assert sum(t.numel * t.count for t in experts) == 192
    assert {t.group for t in experts} == {4}
    assert {t.group for t in held if t not in experts} == {16}


def test_mixtral_tp2_ep8_expert_states_halve() -> None:
    """Mixtral-8x7B on 16 GPUs as TP 2 × DP 8 with EP 8 folded (Megatron): expert DP =
    16 ÷ (1 × 8) = 2, so each rank's one expert (3 × 4096 × 14336 × 32 layers =
    5,637,144,576 elements) keeps half its fp32 master and Adam moments —
    ⌈5,637,144,576 ÷ 2⌉ × 4 B = 11,274,289,152 B each — where the unfolded count
    (expert DP = DP × CP = 1) kept all 22,548,578,304 B. The dense part is sharded over
    DP 8 either way, so the row equals that share plus the halved expert share."""
    plan = with_values(
        plan_for_model_preset("mixtral-8x7b"),
        {
            "parallelism.tp": 2,
            "parallelism.ep": 8,
            "parallelism.dp": 8,
            "parallelism.sequence_parallel": True,
            "parallelism.strategy": "megatron_distopt",
            "method.precision.policy": "amp_master",
            "runtime.allocation_granularity_bytes": 1,
        },
    )
    held, _ = stage_held(resolved(plan), 0)
    expert_elems = sum(t.numel * t.count for t in held if t.group == 2)
    dense_elems = sum(t.numel * t.count for t in held if t.group == 8)
    assert expert_elems == 3 * 4096 * 14336 * 32 == 5_637_144_576
    rows = {r.id: r.high for r in estimate(plan).rows}
    halved = -(-expert_elems // 2) * 4
    assert halved == 11_274_289_152
    assert rows["hbm.optimizer.exp_avg"] == -(-dense_elems // 8) * 4 + halved
    assert rows["hbm.master_weights"] == rows["hbm.optimizer.exp_avg"]
