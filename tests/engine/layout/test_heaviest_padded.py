"""The padded bytes an estimate's outcome keeps (``Outcome.padded``, what the search's
slack reads) worked out from the heaviest stage's shared rows (``evaluate.stage_padded``
of the heaviest stage) equal those of its full rows, on random small plans
(``layout_plans.search_plans``: FSDP1/2, HSDP, ZeRO, DDP, MoE, LoRA) at every legal
layout of a random world, and on real models (QLoRA's dequantized copies among them) at
every legal layout of 8 GPUs — before the rows are built and after."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st
from layout_plans import SEARCH_SETTINGS, legal_layouts, preset_plans, search_plans

from engine.errors import PlanError
from engine.estimate import estimate
from engine.layout.proofs.evaluate import padded_bytes, stage_padded
from engine.layout.shapes import with_layout
from engine.plan import Plan, with_values
from engine.presets import plan_for_model_preset

QLORA = {"method.kind": "qlora"}


def _compare(plan: Plan, world: int) -> int:
    """Assert the two agree at every legal layout of ``world``; how many had padding."""
    padded = 0
    for lay in legal_layouts(plan, world).legal:
        try:
            est = estimate(with_layout(plan, lay), decisive_only=True)
        except PlanError:
            continue
        got = stage_padded(est.heaviest)
        assert got == padded_bytes(est.heaviest.rows), lay
        assert stage_padded(est.heaviest) == got, lay  # the rows built by now
        padded += got > 0
    return padded


@SEARCH_SETTINGS
@given(search_plans(), st.integers(1, 16))
def test_heaviest_padded(case: tuple[Plan, int], world: int) -> None:
    plan, _ = case
    _compare(plan, world)


def test_heaviest_padded_on_presets() -> None:
    plans = [*preset_plans(), with_values(plan_for_model_preset("llama-3.1-8b"), QLORA)]
    padded = [_compare(plan, 8) for plan in plans]
    assert padded[-1] and sum(padded) > 50  # QLoRA's, FSDP's, DDP's buckets (Megatron: 0)
