"""The recommendation the title page leads with: what to buy (count, shape, layout), the
margin, the one measurement that decides, and the layout the validation plan measures.

A purchasing meeting reads the first page and signs it: for a plan that does not fit,
the failing plan's red verdict is not the answer to "what do we buy" — the layout the
counts chose is. The plan's own verdict follows, under its own heading. Every figure
is the counts' (``engine.layout.counts``) with the window's choice rule
(:func:`gui.views.layout_choice.choose`), so page, window and CLI name the same layout.
"""

from __future__ import annotations

from dataclasses import dataclass

from engine.estimate import Estimate, estimate
from engine.layout.point import batch_change, shape_only, step_words
from engine.layout.shapes import Layout, layout_of, with_layout
from engine.presets import accelerator
from engine.units import fmt_bytes, fmt_range
from gui.report.content import ReportContent
from gui.report.html import esc
from gui.views.layout_choice import LayoutRow, choose

THIN_MARGIN = 0.03
"""Headroom under the limit, as a share of it, below which the page calls the margin
thin: the search accepts any layout whose high estimate is at or under the limit, so a
count it returns may sit a hair under it."""


@dataclass(frozen=True, slots=True)
class Target:
    """The layout the validation plan measures, on how many GPUs, and why that one."""

    layout: Layout
    gpus: int
    est: Estimate
    why: str


def accelerator_name(key: str) -> str:
    try:
        return accelerator(key).name
    except KeyError:
        return key


def validation_target(c: ReportContent) -> Target:
    """What to measure first: the low end of a straddling range (the measurement that
    decides between its two counts), else the recommended layout — the plan's own when
    it fits. Its estimate is the plan laid out that way, so the thresholds are that
    layout's, never the failing plan's."""
    k, plan = c.counts, c.pf.plan
    lo = k.validation_low
    chosen = choose(plan, c.est, k).chosen
    if k.straddles and lo.layout is not None and lo.gpus is not None:
        lay, gpus = lo.layout, lo.gpus
        why = (
            f"the low end of the validation range: it decides between {lo.gpus} and "
            f"{k.validation_high.gpus} GPUs"
        )
    elif chosen is not None:
        lay, gpus, why = chosen.layout, chosen.gpus, "the recommended layout"
    else:
        return Target(layout_of(plan), c.est.world_size, c.est, "the plan's own layout")
    own = lay == layout_of(plan)
    est = c.est if own else estimate(with_layout(plan, lay))
    return Target(lay, gpus, est, why)


def _margin(row: LayoutRow, c: ReportContent) -> str:
    limit, cap = row.limit, c.counts.capacity_bytes
    share = row.headroom / limit if limit else 0.0
    pct = c.pf.plan.policy.headroom_percent
    words = (
        f"<b>Margin:</b> {esc(fmt_bytes(row.headroom))} under the limit "
        f"{esc(fmt_bytes(limit))} at the high estimate ({share:.1%} of it); the limit is the "
        f"usable {esc(fmt_bytes(cap))} less the {pct:g} % policy headroom, so "
        f"{esc(fmt_bytes(cap - row.high))} stay free of capacity."
    )
    if share < THIN_MARGIN:
        words += (
            " <b>A thin margin:</b> the search accepts any layout whose high estimate is at "
            "or under the limit, and this one is close to the thinnest it accepts — the "
            "measurement below decides whether it holds."
        )
    return words


def _measure(t: Target, c: ReportContent) -> str:
    k = c.counts
    peak = t.est.heaviest.fit_peak
    limit = esc(fmt_bytes(t.est.limit_bytes))
    head = (
        f"<b>Measure first:</b> the per-rank peak (max_memory_allocated plus the "
        f"fragmentation the allocator cannot release and the memory outside it — what the "
        f"verdict compares — on the heaviest stage) of {esc(t.layout.label())} on "
        f"{t.gpus:,} GPU{'s' * (t.gpus != 1)} — {esc(t.why)}; the estimate says "
        f"{esc(fmt_range(peak.low, peak.high))}."
    )
    if k.straddles and k.validation_high.gpus is not None:
        return (
            head + f" At or under {limit}: {t.gpus:,} GPUs are enough; above it: buy "
            f"{k.validation_high.gpus:,}."
        )
    return head + f" It must stay at or under {limit}; the validation plan lists the rest."


def recommendation_html(c: ReportContent) -> str:
    """The recommendation block: buy, margin, measure — before the plan's verdict."""
    k, plan = c.counts, c.pf.plan
    hw = plan.hardware
    choice = choose(plan, c.est, k)
    row = choice.chosen
    out = ["<h2>Recommendation</h2>"]
    if row is None:
        out.append(
            f"<p><b>Nothing to buy yet:</b> no layout up to {k.max_gpus:,} GPUs fits. "
            f"{esc(k.first_layout.reason)}. The fit levers (GPU counts page) say what "
            f"would.</p>"
        )
        return "".join(out)
    shape = shape_only(row.gpus, hw.gpus_per_node, plan.policy.rounding)
    lay = row.layout
    moved = batch_change(plan, lay.global_batch)
    out.append(
        f'<p style="font-size: 12pt"><b>Buy {row.gpus:,} × '
        f"{esc(accelerator_name(hw.accelerator))}</b> ({esc(shape)}) and run "
        f"<b>{esc(lay.label())}</b> ({esc(plan.parallelism.strategy)}) — global batch "
        f"{esc(step_words(lay.global_batch, plan.batch.seq_len))}"
        + (f" ({esc(moved)})" if moved else "")
        + ".</p>"
    )
    cheaper = k.first_layout
    if row.role == "plan" and cheaper.gpus is not None and cheaper.gpus < row.gpus:
        assert cheaper.layout is not None
        out.append(
            f"<p>This is the plan's own layout. The fewest GPUs that fit are "
            f"{cheaper.gpus:,} ({esc(cheaper.layout.label())}): the cheaper buy, with "
            f"less room (GPU counts page).</p>"
        )
    elif row.role == "first" and c.est.verdict != "fits":
        out.append(
            "<p>The plan as written does not fit (its verdict below): this is the layout "
            "the counts chose for it, the fewest GPUs that fit.</p>"
        )
    out.append(f"<p>{_margin(row, c)}</p>")
    out.append(f"<p>{_measure(validation_target(c), c)}</p>")
    return "".join(out)
