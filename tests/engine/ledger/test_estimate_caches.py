"""A cache hit must give the very estimate a cold computation gives.

``estimate()`` caches work on keys smaller than the plan: a stage's layer kinds and
their saved sets on the geometry, trainability, architecture, attention and recompute
policy they are built from (:mod:`engine.ledger.activations.stage_layers`), so layouts
differing in DP, EP, PP or the strategy share them; resolved plans share equal section
objects (:func:`engine.plan.with_shared_sections`); and the estimate itself is cached on
the plan. A key missing something the cached value reads would give a wrong number on a
hit only — so each random plan is estimated after caches were filled by other plans and
by its own neighbouring layouts, then again with every cache emptied, and the two
estimates must be equal in every field (rows, formulas, timelines, node ledgers).
"""

from __future__ import annotations

import sys
from functools import _lru_cache_wrapper
from typing import Any

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from engine.errors import PlanError
from engine.estimate import Estimate, estimate
from engine.plan import Plan, with_values
from tests.engine.ledger.test_estimate_folding import pipelined


def clear_caches() -> None:
    """Empty every module-level ``functools`` cache of the engine (all of them are)."""
    for name, module in list(sys.modules.items()):
        if name == "engine" or name.startswith("engine."):
            for obj in vars(module).values():
                if isinstance(obj, _lru_cache_wrapper):
                    obj.cache_clear()


def _neighbours(plan: Plan, dp: int, micro_batch: int, strategy: str) -> list[Plan]:
    """Layouts, batches and methods next to ``plan``: what the layout search and the
    window's edits estimate before it (the illegal ones are skipped)."""
    changes: list[dict[str, Any]] = [
        {"parallelism.dp": dp},
        {"batch.micro_batch": micro_batch},
        {"parallelism.strategy": strategy},
        {"parallelism.dp": dp, "batch.micro_batch": micro_batch},
        *({path: value} for path, value in EDITS.values()),
    ]
    out = []
    for change in changes:
        try:
            out.append(with_values(plan, change))
        except ValueError:
            continue
    return out


EDITS: dict[str, tuple[str, Any]] = {
    "recompute": ("method.recompute.policy", "selective"),
    "no recompute": ("method.recompute.policy", "none"),
    "every other layer": ("method.recompute.policy", "every_k"),
    "eager attention": ("runtime.attention", "eager"),
    "lora": ("method.kind", "lora"),
    "full": ("method.kind", "full"),
    "megatron profile": ("runtime.activation_profile", "megatron"),
    "hf profile": ("runtime.activation_profile", "hf-transformers"),
}
"""Inputs a cached piece of an estimate reads (recompute policy, attention, trainability,
activation profile): one neighbour differing in each."""


def _estimate_or_none(plan: Plan, decisive_only: bool = False) -> Estimate | None:
    try:
        return estimate(plan, decisive_only=decisive_only)
    except PlanError:
        return None


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    pipelined(),
    pipelined(),
    st.sampled_from([1, 2, 4]),
    st.integers(1, 3),
    st.sampled_from(["fsdp2", "ddp", "zero3", "megatron_distopt"]),
    st.sampled_from([64, 256, 1024]),
    st.sampled_from(["hf-transformers", "megatron"]),
)
def test_an_estimate_from_filled_caches_equals_a_cold_one(
    tiny: Plan,
    other: Plan,
    dp: int,
    micro_batch: int,
    strategy: str,
    seq: int,
    profile: str,
) -> None:
    """Warm: ``other`` and ``plan``'s neighbours estimated first (both ways, as the
    window and the search ask), then ``plan``. Cold: every engine cache emptied, then
    ``plan``. Equal estimates, field by field, whole and decisive-only. The sequence is
    long enough that activation tensors outgrow the allocator's 512-B rounding (at a
    few tokens every saved tensor rounds to one block, and a wrong hit could hide)."""
    plan = with_values(tiny, {"batch.seq_len": seq, "runtime.activation_profile": profile})
    for p in (other, *_neighbours(plan, dp, micro_batch, strategy)):
        _estimate_or_none(p)
        _estimate_or_none(p, decisive_only=True)
    warm = _estimate_or_none(plan)
    warm_decisive = _estimate_or_none(plan, decisive_only=True)
    assume(warm is not None)
    clear_caches()
    assert _estimate_or_none(plan) == warm
    clear_caches()
    assert _estimate_or_none(plan, decisive_only=True) == warm_decisive
