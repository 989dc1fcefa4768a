"""Eager attention's masks: two for full + sliding-window families, kept through
backward by checkpointed layers (issue 35 item 8; transformers 5.24
``masking_utils.eager_mask``, ``Gemma2Model.forward``'s ``causal_mask_mapping``)."""

from __future__ import annotations

from typing import Any

from engine.estimate import estimate
from engine.plan import with_values
from engine.presets import plan_for_model_preset
from engine.stacks.defaults import resolved


def _mask(preset: str, **changes: Any) -> tuple[int, frozenset[str]]:
    base = {"runtime.attention": "eager", **changes}
    plan = resolved(with_values(plan_for_model_preset(preset), base))
    row = next(r for r in estimate(plan).rows if r.id == "hbm.activations.forward.mask")
    return row.high, row.moments


def test_gemma2_checkpointed_keeps_both_masks_through_backward() -> None:
    """Gemma-2-2B, s 4,096, b 1, bf16: a full and a sliding-window mask, each
    1 · 4,096 · 4,096 · 2 B = 33,554,432 → 67,108,864 B; under full recompute every
    checkpointed layer keeps its type's mask until the first layer's backward."""
    high, moments = _mask("gemma-2-2b", **{"method.recompute.policy": "full"})
    assert high == 2 * 4_096 * 4_096 * 2 == 67_108_864
    assert {"forward", "backward.start", "backward.middle", "backward.end"} <= moments


def test_without_checkpointing_masks_die_with_forward() -> None:
    high, moments = _mask("gemma-2-2b")
    assert high == 67_108_864 and moments == frozenset({"forward"})


def test_llama_builds_one_mask() -> None:
    """Llama: one causal mask, 4,096² · 2 B."""
    high, _ = _mask("llama-3.1-8b")
    assert high == 4_096 * 4_096 * 2
