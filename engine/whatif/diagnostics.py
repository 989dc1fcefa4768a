"""Diagnostics: the rows that dominate the peak, and what one change each would save.

Every suggestion is computed, never canned: the plan is re-estimated with exactly one
change and the saving is the difference of the high peaks. Changes the engine cannot
estimate (or the plan cannot take) are listed with the reason, not hidden.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from engine.errors import PlanError
from engine.estimate import estimate
from engine.layout.proofs.evaluate import Estimator
from engine.ledger.row import Row
from engine.plan import Plan, with_values
from engine.stacks.defaults import resolved

MIN_SAVING_BYTES = 10**7
"""The least a suggestion must save to be offered: 0.01 GB, the finest figure the
window and the report print (a smaller saving would read "saves 0.00 GB")."""

DOMINANT_ROWS = 5


@dataclass(frozen=True, slots=True)
class Dominant:
    row: Row
    share: float  # of the heaviest stage's peak phase (high)


@dataclass(frozen=True, slots=True)
class Suggestion:
    """One change, its effect on the high peak, or why it could not be estimated."""

    label: str
    changes: dict[str, Any]
    peak_high: int | None
    saves: int | None
    fits: bool | None
    error: str | None = None


@dataclass(frozen=True, slots=True)
class Diagnosis:
    peak_high: int
    limit: int
    dominant: tuple[Dominant, ...]
    suggestions: tuple[Suggestion, ...]  # saving > 0, largest first
    not_applicable: tuple[Suggestion, ...]


def candidate_changes(plan: Plan) -> list[tuple[str, dict[str, Any]]]:
    """One-change variants of the plan worth trying (only those that differ)."""
    par, m, b = plan.parallelism, plan.method, plan.batch
    out: list[tuple[str, dict[str, Any]]] = []
    for s, label in (
        ("zero1", "ZeRO-1"),
        ("zero2", "ZeRO-2"),
        ("zero3", "ZeRO-3"),
        ("fsdp2", "FSDP2 full shard"),
    ):
        if par.strategy != s:
            out.append((f"use {label}", {"parallelism.strategy": s}))
    current = resolved(plan).method.recompute.policy  # auto: the stack's policy
    for r in ("selective", "full"):
        if current != r:
            out.append((f"{r} activation recompute", {"method.recompute.policy": r}))
    for loss in ("chunked", "fused"):
        if plan.runtime.loss != loss:
            out.append((f"{loss} cross-entropy", {"runtime.loss": loss}))
    for kind, name in (("lora", "LoRA"), ("qlora", "QLoRA")):
        if m.kind != kind:
            out.append((f"train with {name}", {"method.kind": kind}))
    if plan.offload.optimizer == "none":
        out.append(("offload the optimizer state to CPU", {"offload.optimizer": "cpu"}))
    if plan.offload.params == "none":
        out.append(
            (
                "ZeRO-3 with parameters offloaded to CPU",
                {"parallelism.strategy": "zero3", "offload.params": "cpu"},
            )
        )
    if b.micro_batch > 1:
        half = b.micro_batch // 2
        out.append(
            (
                f"micro-batch {half} with {b.grad_accum * 2} accumulation steps",
                {"batch.micro_batch": half, "batch.grad_accum": b.grad_accum * 2},
            )
        )
    if par.dp % 2 == 0:
        out.append(
            (
                f"TP {par.tp * 2} (DP {par.dp // 2})",
                {"parallelism.tp": par.tp * 2, "parallelism.dp": par.dp // 2},
            )
        )
        out.append(
            (
                f"PP {par.pp * 2} (DP {par.dp // 2})",
                {
                    "parallelism.pp": par.pp * 2,
                    "parallelism.dp": par.dp // 2,
                    "parallelism.pp_layer_split": None,
                },
            )
        )
    return out


def diagnose(plan: Plan, estimator: Estimator | None = None) -> Diagnosis:
    """Dominant rows and re-estimated one-change suggestions. Raises PlanError if the
    plan itself cannot be estimated."""
    est_fn = estimator or estimate
    base = est_fn(plan)
    stage = base.heaviest
    live = [r for r in stage.rows if r.location == "hbm" and r.live_in(stage.peak_phase)]
    moments = getattr(stage, "peak_moments", None)  # a peak row of another moment of the
    if moments is not None:  # phase (what is left of the saved sets mid-backward) is not
        at, acc = moments[stage.peak_phase], stage.accumulating  # at the peak
        live = [r for r in live if r.kind == "persistent" or r.live_at(at, acc)]
    live.sort(key=lambda r: -r.high)
    peak = max(stage.fit_peak.high, 1)
    dominant = tuple(Dominant(r, r.high / peak) for r in live[:DOMINANT_ROWS])
    good: list[Suggestion] = []
    bad: list[Suggestion] = []
    for label, changes in candidate_changes(plan):
        try:
            e = est_fn(with_values(plan, changes))
        except (PlanError, ValidationError, KeyError) as exc:
            bad.append(Suggestion(label, changes, None, None, None, _reason(exc)))
            continue
        saves = base.fit_peak.high - e.fit_peak.high
        s = Suggestion(label, changes, e.fit_peak.high, saves, e.fit_peak.high <= e.limit_bytes)
        (good if saves >= MIN_SAVING_BYTES else bad).append(
            s
            if saves >= MIN_SAVING_BYTES
            else Suggestion(label, changes, e.fit_peak.high, saves, s.fits, _no_saving(saves))
        )
    good.sort(key=lambda s: -(s.saves or 0))
    return Diagnosis(base.fit_peak.high, base.limit_bytes, dominant, tuple(good), tuple(bad))


def _no_saving(saves: int) -> str:
    """Why a change is not offered: it saves nothing, too little to show, or costs."""
    if saves == 0:
        return "saves nothing in this ledger"
    if saves > 0:
        return f"saves only {saves:,} B (under {MIN_SAVING_BYTES:,} B)"
    return f"raises the peak by {-saves:,} B"


def _reason(exc: Exception) -> str:
    if isinstance(exc, ValidationError):
        return "; ".join(e["msg"].removeprefix("Value error, ") for e in exc.errors())
    return str(exc.args[0]) if exc.args else type(exc).__name__
