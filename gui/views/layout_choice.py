"""Which layout a view presents as chosen, the rows it offers, and what Apply changes.

No Qt here: the Layouts tab and the report's topology section make the same choice.

The rule that keeps the counts, the chosen layout and the plan on screen in agreement:
when the plan's own layout fits, it is the chosen one — the search's first legal layout
(the fewest ranks that fit) is then offered as an alternative, not presented as a
contradiction of a plan that works. When the plan does not fit, the first legal layout
is the chosen one. (``engine.layout.counts`` applies the same rule: the plan's own
layout wins every tie, and ``GpuCounts.chosen`` names it.)

Rejected layouts are listed only when their reason can apply to this model: a dense
model is never told, layout after layout, that EP needs a mixture-of-experts model.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from engine.estimate import Estimate
from engine.layout.counts import GpuCounts, validation_range
from engine.layout.point import procurement
from engine.layout.shapes import Layout, Rejected, layout_of, with_layout
from engine.plan import Plan, get_value

Role = Literal["plan", "first", "alternative"]
ROLE_WORDS: dict[Role, str] = {
    "plan": "the plan's own layout",
    "first": "first legal layout (fewest ranks that fit)",
    "alternative": "alternative at the procurement size",
}
APPLIED_SECTIONS = ("parallelism", "batch")
"""The plan sections a layout sets (the parallel sizes and the batch geometry)."""


@dataclass(frozen=True, slots=True)
class LayoutRow:
    """One layout a view offers, with its peak per rank and what buying it costs."""

    role: Role
    layout: Layout
    low: int
    high: int
    limit: int
    gpus: int  # paid for: whole nodes, or GPUs, by the plan's rounding policy
    rank: int = 0  # position among the alternatives (1 = most headroom)

    @property
    def headroom(self) -> int:
        return self.limit - self.high

    @property
    def fits(self) -> bool:
        return self.high <= self.limit


@dataclass(frozen=True, slots=True)
class LayoutChoice:
    """The chosen layout, the rows offered (chosen first), the rejections that apply."""

    chosen: LayoutRow | None
    rows: tuple[LayoutRow, ...]
    rejected: tuple[Rejected, ...]
    hidden_rejections: int  # rejected layouts whose reason cannot apply to this model
    why_hidden: str
    note: str  # how the chosen layout relates to the counts, in one sentence


def gpus_to_buy(plan: Plan, layout: Layout) -> int:
    return procurement(layout.world_size, plan.hardware.gpus_per_node, plan.policy.rounding)


def _cannot_apply(plan: Plan, r: Rejected) -> bool:
    """True when the layout uses a dimension this model can never use (EP on a model
    without experts), so its rejection says nothing about this plan."""
    return r.layout.ep > 1 and plan.model.architecture.moe is None


def relevant_rejections(plan: Plan, rejected: tuple[Rejected, ...]) -> tuple[Rejected, ...]:
    return tuple(r for r in rejected if not _cannot_apply(plan, r))


def choose(plan: Plan, est: Estimate, counts: GpuCounts) -> LayoutChoice:
    """The chosen layout and the offered rows for the plan on screen."""
    own = layout_of(plan)
    own_row = LayoutRow(
        "plan", own, est.fit_peak.low, est.fit_peak.high, est.limit_bytes, gpus_to_buy(plan, own)
    )
    first = counts.first_layout
    first_row = None
    if first.layout is not None and first.outcome is not None and first.gpus is not None:
        o = first.outcome
        first_row = LayoutRow("first", first.layout, o.low, o.high, o.limit, first.gpus)
    alts = [
        LayoutRow("alternative", o.layout, o.low, o.high, o.limit, gpus_to_buy(plan, o.layout), k)
        for k, o in enumerate(counts.alternatives, start=1)
    ]
    plan_fits = est.verdict == "fits"
    chosen = own_row if plan_fits else first_row
    rows = [own_row]
    if first_row is not None and first_row.layout != own:
        rows.insert(0 if not plan_fits else 1, first_row)
    rows += [a for a in alts if a.layout not in {r.layout for r in rows}]
    relevant = relevant_rejections(plan, counts.rejected)
    hidden = len(counts.rejected) - len(relevant)
    return LayoutChoice(
        chosen=chosen,
        rows=tuple(rows),
        rejected=relevant,
        hidden_rejections=hidden,
        why_hidden=(
            f"{hidden} layout(s) with EP > 1 not listed: this model has no experts"
            if hidden
            else ""
        ),
        note=_note(plan_fits, own_row, first_row),
    )


def _note(plan_fits: bool, own: LayoutRow, first: LayoutRow | None) -> str:
    if plan_fits:
        if first is not None and first.gpus < own.gpus:
            return (
                f"The plan's own layout fits on {own.gpus} GPUs; the fewest that fit are "
                f"{first.gpus} ({first.layout.label()}): Apply it to buy less."
            )
        return f"The plan's own layout fits: {own.gpus} GPUs to buy."
    if first is None:
        return "The plan's layout does not fit and no layout within the search bound does."
    return (
        f"The plan's layout does not fit; the first legal layout that does is "
        f"{first.layout.label()} on {first.gpus} GPUs."
    )


def layout_changes(plan: Plan, layout: Layout) -> dict[str, Any]:
    """The field paths (and values) that turn ``plan`` into ``layout``: what Apply sets,
    as one undoable edit. Empty when the plan already has that layout."""
    target = with_layout(plan, layout)
    changes: dict[str, Any] = {}
    for section in APPLIED_SECTIONS:
        before = get_value(plan, section)
        after = get_value(target, section)
        for key, value in after.items():
            if before.get(key) != value and key != "knobs":
                changes[f"{section}.{key}"] = value
    return changes


def validation_text(c: GpuCounts) -> str:
    """The validation range in the engine's one spelling
    (:func:`engine.layout.counts.validation_range`): ascending, GPUs to buy, with the
    ranks its layouts use beside it when they differ."""
    return validation_range(c)
