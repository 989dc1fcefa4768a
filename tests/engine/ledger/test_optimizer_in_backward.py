"""The optimizer step fused into backward (engine/ledger/peaks/optimizer_in_backward.py),
following torchtune/training/memory.py ``register_optim_in_bwd_hooks``: each parameter's
optimizer steps and zeroes its gradient (set_to_none) from a post-accumulate-grad hook."""

from __future__ import annotations

from ledger_plans import SMOL

from engine.estimate import estimate
from engine.plan import Plan, default_plan, with_values

BASE = {
    "model.preset": None,
    "model.name": "SmolLM-135M",
    **{f"model.architecture.{k}": v for k, v in SMOL.items()},
    "stack.name": "pytorch",
    "parallelism.strategy": "ddp",
    "parallelism.dp": 1,
    "method.precision.policy": "pure_16bit",
    "method.optimizer.implementation": "foreach",
    "batch.seq_len": 512,
}


def _rows(plan: Plan) -> dict[str, tuple[int, int, frozenset[str]]]:
    return {r.id: (r.low, r.high, r.moments) for r in estimate(plan).heaviest.rows}


def test_one_parameters_gradient_and_step_live_in_backward() -> None:
    """SmolLM-135M's largest parameter is the tied embedding, 49152 × 576 = 28,311,552
    elements: its bf16 gradient is 56,623,104 B and its foreach AdamW step one bf16 copy
    of it, 56,623,104 B: 113,246,208 B live while the layers' backward runs. The model's
    gradients (269,053,440 B eagerly) never exist together, and there is no optimizer
    step after backward."""
    eager = _rows(with_values(default_plan(), BASE))
    fused = _rows(with_values(default_plan(), {**BASE, "method.optimizer.in_backward": True}))
    assert eager["hbm.grads"][:2] == (269_053_440, 269_053_440)
    assert fused["hbm.grads"][:2] == (0, 0) and not fused["hbm.grads"][2]
    low, high, moments = fused["hbm.grads.in_backward"]
    assert low == high == 2 * 28_311_552 * 2
    assert "optimizer" not in moments and "backward.layers" in moments
    for gone in ("hbm.grads.before_first_layer", "hbm.optimizer_step.temporaries"):
        assert gone in eager and gone not in fused


def test_a_step_bound_plan_loses_its_optimizer_peak() -> None:
    """Full AC at 128 tokens: the eager peak is the optimizer step (weights, two moments,
    the gradients and the foreach copy: 5 × ~269 MB); fused into backward, the peak moves
    to backward and drops by more than the gradients and the step's copy less the one
    parameter's pair (2 × 269,053,440 − 113,246,208 = 424,860,672 B, less what backward
    adds there)."""
    sets = {**BASE, "method.recompute.policy": "full", "batch.seq_len": 128}
    eager = estimate(with_values(default_plan(), sets))
    fused = estimate(with_values(default_plan(), {**sets, "method.optimizer.in_backward": True}))
    assert eager.heaviest.peak_phase == "optimizer"
    assert fused.heaviest.peak_phase == "backward"
    assert 300_000_000 < eager.peak.high - fused.peak.high <= 424_860_672
