"""Folding for speed must not change a byte: stages that place the same tensors share
their rows, and identical routed experts fold like identical layers.

DeepSeek-V3 (61 layers, the first 3 dense, 256 routed experts) on PP16 with the split
[3, 4 × 14, 2]: stage 0 holds the embedding and the 3 dense layers, stages 1–14 four MoE
layers each, stage 15 two MoE layers, the final norm, the head and the MTP module —
three kinds of stage. Under EP 64 rank 0 holds experts 0–3 (256 ÷ 64): each expert
matrix kind is one representative counting 4 experts × the stage's MoE layers.
"""

from __future__ import annotations

from engine.ledger.placement import place_stage, representative_stages
from engine.models.spec import ArchitectureSpec
from engine.plan import with_values
from engine.presets import plan_for_model_preset
from engine.sections.parallel import ParallelismSection
from engine.stacks.defaults import resolved

SPLIT = [3, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 2]


def _plan(ep: int) -> tuple[ArchitectureSpec, ParallelismSection]:
    plan = resolved(
        with_values(
            plan_for_model_preset("deepseek-v3"),
            {
                "parallelism.strategy": "megatron_distopt",
                "parallelism.pp": 16,
                "parallelism.ep": ep,
                "parallelism.dp": 64,
                "parallelism.pp_layer_split": SPLIT,
            },
        )
    )
    return plan.model.architecture, plan.parallelism


def test_three_kinds_of_stage() -> None:
    arch, par = _plan(64)
    assert representative_stages(arch, par) == (0, *([1] * 14), 15)


def test_a_stage_places_what_its_representative_places() -> None:
    """Every middle stage's local tensors, by (shape, role, expert flag, count), equal
    stage 1's: the persistent rows computed once stand for all of them."""
    arch, par = _plan(64)

    def summary(stage: int) -> list[tuple[object, ...]]:
        placed = place_stage(arch, par, stage)
        return sorted((t.shape, t.tensor.role, t.expert, t.count) for t in placed)

    assert all(summary(s) == summary(1) for s in range(2, 15))


def test_experts_fold_to_rank_zeros_slice() -> None:
    """EP 64: 4 experts per rank; stage 1 (4 MoE layers): each routed-expert kind is one
    tensor of count 4 × 4 = 16. EP 1: all 256 experts, count 256 × 4 = 1,024."""
    for ep, count in ((64, 16), (1, 1024)):
        arch, par = _plan(ep)
        experts = [t for t in place_stage(arch, par, 1) if t.expert]
        assert experts and {t.count for t in experts} == {count}
