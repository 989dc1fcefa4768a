"""The GPU counts and layouts section: the three counts with their reasons, the chosen
layout, the ranked alternatives at the procurement size, the fit levers, the rejected
layouts, and the largest micro-batch and longest sequence that fit the plan's own
layout."""

from __future__ import annotations

import re
from collections.abc import Sequence

from engine.layout import Rejected
from engine.layout.point import PREFERENCES_TITLE, RULES_TITLE, grouped, rounding_noun, step_words
from engine.units import fmt_bytes
from gui.report.content import ReportContent
from gui.report.html import esc, heading, size, table
from gui.views.layout_choice import choose, validation_text
from gui.views.lever_rows import INTRO, levers_status

REJECTED_SHOWN = 12
"""Kinds of rejection listed (see :func:`rejection_kinds`)."""


def rejection_kinds(rejected: Sequence[Rejected]) -> list[tuple[Rejected, int]]:
    """One rejected layout per kind of reason, with how many share it. Reasons that
    differ only in their numbers ("CP 3 must divide 4096", "CP 5 …") are one kind: a
    search rejects hundreds of layouts for a handful of reasons, and twelve rows of the
    first reason would hide the others."""
    kinds: dict[str, list[Rejected]] = {}
    for r in rejected:
        kinds.setdefault(re.sub(r"\d+", "#", "; ".join(r.reasons)), []).append(r)
    return [(same[0], len(same)) for same in kinds.values()]


def counts_html(c: ReportContent, reasons: bool = True) -> str:
    """The three GPU counts with their reasons (the layouts page), or without them (the
    title page, where the recommendation already says what they mean)."""
    k = c.counts

    def gpus(n: int | None) -> str:
        return "none found" if n is None else f"{n} GPU{'s' * (n != 1)}"

    items = [
        ("1. Arithmetic minimum", gpus(k.arithmetic_min.gpus), k.arithmetic_min.reason),
        (
            "2. First legal layout (procurement)",
            k.shape if k.nodes else gpus(None),
            k.first_layout.reason,
        ),
        ("3. Validation range", validation_text(k), k.validation_reason),
    ]
    if not reasons:
        lines = "<br>".join(f"<b>{esc(t)}:</b> {esc(v)}" for t, v, _ in items)
        return f"<p>{lines}<br><span class='small'>Their reasons: the GPU counts page.</span></p>"
    return "".join(
        f'<p><b>{esc(t)}: {esc(v)}</b><br><span style="font-size: 8pt">{esc(why)}</span></p>'
        for t, v, why in items
    )


def layouts_section(c: ReportContent) -> str:
    k = c.counts
    out = [heading(1, "GPU counts and layouts", "layouts")]
    out.append(
        f'<p class="small">Searched up to {k.max_gpus:,} GPUs, {k.gpus_per_node} per node, '
        f"rounding to whole {rounding_noun(k.rounding)}, {k.estimates} estimates; limit "
        f"{esc(fmt_bytes(k.limit_bytes))} per rank.</p>"
    )
    out.append(counts_html(c))
    choice = choose(c.pf.plan, c.est, k)  # the rule the window's Layouts tab follows
    chosen = choice.chosen
    if chosen is not None:
        out.append("<h2>Chosen layout</h2>")
        out.append(f'<p class="small">{esc(choice.note)}</p>')
        out.append(
            table(
                ["Layout", "GPUs to buy", "Global batch", "Peak per rank (low–high)", "Headroom"],
                [
                    [
                        esc(chosen.layout.label()),
                        str(chosen.gpus),
                        esc(step_words(chosen.layout.global_batch, k.seq_len)),
                        size(chosen.low, chosen.high, "both"),
                        esc(fmt_bytes(chosen.headroom)),
                    ]
                ],
                [28, 10, 22, 26, 14],
            )
        )
    out.append("<h2>Alternatives at the procurement size, by headroom</h2>")
    if k.alternatives:
        rows = [
            [
                str(i),
                esc(o.layout.label()),
                esc(step_words(o.layout.global_batch, k.seq_len))
                + ("" if o.layout.global_batch == k.plan_batch else " (not the plan's)"),
                size(o.low, o.high, "both"),
                esc(fmt_bytes(o.headroom)),
            ]
            for i, o in enumerate(k.alternatives, start=1)
        ]
        head = ["#", "Layout", "Global batch", "Peak per rank (low–high)", "Headroom"]
        out.append(table(head, rows, [4, 30, 24, 28, 14]))
    else:
        out.append('<p class="muted">No other layout of that size fits.</p>')
    out.append(levers_html(c))
    rejected = choice.rejected  # only the rejections that can apply to this model
    if rejected:
        out.append(f"<h3>Rejected layouts ({len(rejected)})</h3>")
    for title, group in zip((RULES_TITLE, PREFERENCES_TITLE), grouped(rejected), strict=True):
        if not group:
            continue  # rules apart from preferences: a preference's layout would run
        kinds = rejection_kinds(group)
        shown = kinds[:REJECTED_SHOWN]
        more = f", the first {len(shown)} shown" if len(kinds) > len(shown) else ""
        plural = "s" if len(kinds) > 1 else ""
        out.append(
            f"<h4>{esc(title)}: {len(group)} layout{'s' * (len(group) != 1)}, "
            f"{len(kinds)} kind{plural} of reason{more}</h4>"
        )
        rows = [[esc(r.layout.label()), esc("; ".join(r.reasons)), str(n)] for r, n in shown]
        out.append(
            table(
                ["Layout (the first of its kind)", "Why not", "Layouts alike"], rows, [30, 56, 14]
            )
        )
    if choice.why_hidden:
        out.append(f'<p class="small">{esc(choice.why_hidden)}.</p>')
    out.append(fit_html(c))
    out += [f'<p class="small">Note: {esc(n)}</p>' for n in k.notes]
    return "".join(out)


def levers_html(c: ReportContent) -> str:
    """The fit levers, as the window's Layouts tab lists them (``gui.views.lever_rows``):
    each the plan with one change, its GPUs against the plan's own, and its cost."""
    out = ["<h2>Fit levers (alternatives, never applied)</h2>"]
    if c.levers is None:
        out.append('<p class="muted">Left out of this report (memplan report --no-levers).</p>')
        return "".join(out)
    got = levers_status(c.levers, c.counts)
    if isinstance(got, str):
        out.append(f'<p class="muted">{esc(got)}</p>')
        return "".join(out)
    out.append(f'<p class="small">{esc(INTRO)}</p>')
    rows = [
        [
            f"<b>{esc(r.name)}</b><br>{esc(r.change)}",
            esc(r.gpus) + (f"<br>{esc(r.layout)}" if r.layout else ""),
            esc(r.minimum),
            esc(r.lever.cost),
        ]
        for r in got
    ]
    out.append(
        table(
            ["Lever and its change", "GPUs to buy with it", "Arithmetic minimum", "Cost"],
            rows,
            [24, 26, 14, 36],
        )
    )
    return "".join(out)


def fit_html(c: ReportContent) -> str:
    """What still fits the plan's own layout when the micro-batch or the sequence grows
    (the fit searches of ``engine.analysis``), each with its reason."""
    f = c.fit
    lines = "".join(
        f"<br><b>{esc(title)}: {esc(r.answer)}</b> — "
        f'<span style="font-size: 8pt">{esc(r.reason)}; searched {esc(r.searched)}</span>'
        for title, r in (
            ("Largest micro-batch", f.micro_batch),
            ("Longest sequence", f.sequence),
        )
    )
    return (
        "<h2>What fits the plan's own layout</h2>"
        f'<p><span class="small">{esc(f.layout.label())} on {f.layout.world_size} ranks, '
        "one input grown at a time, by the high estimate against the limit.</span>"
        f"{lines}</p>"
    )
