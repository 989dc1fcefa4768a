"""The Topology section: the chosen layout drawn as nodes, GPUs and groups, and a table
of which links carry what.

The chosen layout is the Layouts tab's (``gui.views.layout_choice``): the plan's own
when it fits, else the first legal layout of the search — so the diagram never shows a
layout the rest of the report contradicts. The diagram is a vector drawing
(:func:`gui.views.topology.draw_topology`), recorded like the charts.
"""

from __future__ import annotations

from PySide6.QtCore import QRectF
from PySide6.QtGui import QColor, QPainter

from engine.layout.shapes import ranks_per_node
from gui.report.content import ReportContent
from gui.report.html import CHART_WIDTH, INK, chart, esc, heading, table
from gui.views.layout_choice import choose
from gui.views.topology import Topology, draw_topology, topology, topology_height


def chosen_topology(c: ReportContent) -> Topology | None:
    choice = choose(c.pf.plan, c.est, c.counts)
    if choice.chosen is None:
        return None
    plan = c.pf.plan
    return topology(choice.chosen.layout, ranks_per_node(plan), plan.parallelism.strategy)


def topology_section(c: ReportContent) -> str:
    out = [heading(1, "Topology", "topology")]
    t = chosen_topology(c)
    if t is None:
        out.append('<p class="muted">No layout fits within the search bound: nothing to draw.</p>')
        return "".join(out)
    choice = choose(c.pf.plan, c.est, c.counts)
    out.append(f"<p>{esc(choice.note)}</p>")
    out.append(
        '<p class="small">Ranks are numbered TP fastest, then CP, EP, DP and PP '
        "(Megatron-Core's default order tp-cp-ep-dp-pp) and placed in order, "
        f"{t.ranks_per_node} to a node. Each GPU shows its rank and its index in every "
        "dimension larger than 1 (t = TP, c = CP, e = EP, d = DP, p = PP); GPUs of one "
        "pipeline stage share a fill colour; a coloured line joins the members of each "
        "group inside a node.</p>"
    )
    out.append(chart("topology", CHART_WIDTH, round(topology_height(t))))
    rows = [
        [
            f"<b>{esc(g.dim.upper())}</b>",
            f"{g.size:,}",
            f"{g.count:,}",
            esc(g.link),
            f'<span class="small">{esc(g.carries)}</span>',
        ]
        for g in t.groups
    ]
    if rows:
        out.append("<h2>Groups and the links they use</h2>")
        out.append(
            table(
                ["Group", "Ranks each", "Groups", "Link", "Carries"],
                rows,
                [9, 11, 10, 25, 45],
                numeric={1, 2},
            )
        )
    else:
        out.append('<p class="muted">One rank: no communication groups.</p>')
    return "".join(out)


def draw_topology_chart(c: ReportContent, painter: QPainter, rect: QRectF) -> None:
    t = chosen_topology(c)
    if t is not None:
        draw_topology(painter, rect, t, QColor(INK))
