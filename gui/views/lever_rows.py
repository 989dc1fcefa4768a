"""The fit levers as rows of words: what the Layouts tab and the PDF report print.

A lever (``engine.layout.levers``) is the plan with one change — full recompute,
offload, LoRA, QLoRA, micro-batch 1 — searched like the plan. The analyst's question is
"how many GPUs would that save, and at what price", so each row sets the lever's count
against the plan's own ("256 instead of 512"), names the change by the fields' labels
(never a dotted path), and says why a lever the stack cannot run is not offered. Both
front ends print these same rows, so the window and the report never disagree; no Qt
here.
"""

from __future__ import annotations

from dataclasses import dataclass

from engine.errors import PlanError
from engine.layout.counts import GpuCounts
from engine.layout.levers import LeverSummary
from gui.fields.undo_text import field_noun, value_words

PENDING = "Searching fit levers… (each is the plan with one change, searched like the plan)"
NONE_LEFT = "None left to pull: the plan already uses every fit lever."
INTRO = (
    "Each lever is the plan with one change, searched like the plan: an alternative with "
    "its cost in words, never applied to the plan by itself."
)


@dataclass(frozen=True, slots=True)
class LeverRow:
    """One lever in words; ``lever`` is what Apply sets (its ``changes``)."""

    lever: LeverSummary
    change: str  # "activation recomputation: full"
    gpus: str  # "256 instead of 512", or why there is no count
    minimum: str  # the arithmetic minimum with it vs without ("" when it cannot run)
    layout: str  # the procurement layout behind ``gpus`` ("" when none)

    @property
    def runnable(self) -> bool:
        """Whether the stack can run the lever (only then is it offered to apply)."""
        return self.lever.error is None

    @property
    def name(self) -> str:
        return self.lever.name[:1].upper() + self.lever.name[1:]


def with_vs_without(with_it: int | None, without: int | None) -> str:
    """A count with the lever pulled against the plan's own: "256 instead of 512"."""
    if with_it is None:
        return "none found within the search bound"
    if without is None:
        return f"{with_it:,} (none found without it)"
    if with_it == without:
        return f"{with_it:,} (the same without it)"
    return f"{with_it:,} instead of {without:,}"


def change_words(lever: LeverSummary) -> str:
    """The lever's changes by the fields' labels: "offload of optimizer state: CPU; …"."""
    return "; ".join(f"{field_noun(path)}: {value_words(path, v)}" for path, v in lever.changes)


def lever_rows(levers: tuple[LeverSummary, ...], base: GpuCounts) -> tuple[LeverRow, ...]:
    """Each lever as a row, its counts set against the plan's own ``base`` counts."""
    out = []
    for lv in levers:
        if lv.error is not None:
            gpus, minimum = f"cannot run: {lv.error}", ""
        elif lv.gpus is None:
            gpus = f"none found: {lv.reason}" if lv.reason else with_vs_without(None, None)
            minimum = with_vs_without(lv.arithmetic_min, base.arithmetic_min.gpus)
        else:
            gpus = with_vs_without(lv.gpus, base.first_layout.gpus)
            minimum = with_vs_without(lv.arithmetic_min, base.arithmetic_min.gpus)
        layout = lv.layout.label() if lv.layout is not None else ""
        out.append(LeverRow(lv, change_words(lv), gpus, minimum, layout))
    return tuple(out)


def levers_status(levers: object, counts: object) -> str | tuple[LeverRow, ...]:
    """The rows to show, or the sentence to show instead: the levers part (a tuple of
    summaries, a PlanError, or None while it is searched) and the counts it is set
    against (shown only once both are here)."""
    if isinstance(levers, PlanError):
        return f"The fit levers are unavailable: {levers}"
    if isinstance(counts, PlanError):
        return f"The fit levers are unavailable: {counts}"
    if not isinstance(levers, tuple) or not isinstance(counts, GpuCounts):
        return PENDING
    if not levers:
        return NONE_LEFT
    return lever_rows(levers, counts)
