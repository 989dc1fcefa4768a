"""The memory sections: the per-rank ledger, the charts and step timeline, the pipeline
stages, and host RAM, NVMe and checkpoint storage per node.

Exact low and high bytes stand next to every rounded size, with the formula and the
source of each row, so a figure can be audited against ``memplan estimate --formulas``.
"""

from __future__ import annotations

from engine.estimate import Estimate
from engine.ledger.row import LOCATIONS, PHASES, Row
from engine.units import UnitChoice
from gui.report.content import ReportContent
from gui.report.html import (
    CHART_WIDTH,
    chart,
    esc,
    figures_table,
    gb_range,
    gib_range,
    heading,
    size,
    table,
)
from gui.report.sources import Citations
from gui.views.chart_common import legend_html, panel_groups
from gui.views.chart_data import panels

LEDGER_CHART_HEIGHT = 270
STAGES_CHART_HEIGHT = 230
"""Heights of the ledger and stage charts (drawn from the window's chart data by
gui.views.chart_paint, recorded by gui.report.charts)."""

LOCATION_TITLES = {
    "hbm": "HBM (GPU memory) per rank",
    "host": "Host RAM attributed to the rank",
    "nvme": "NVMe attributed to the rank",
    "checkpoint": "Checkpoint storage attributed to the rank",
}


def _ledger_rows(rows: tuple[Row, ...], cites: Citations) -> list[list[str]]:
    out: list[list[str]] = []
    for r in rows:
        phases = ", ".join(p for p in PHASES if p in r.phases)
        out.append(
            [
                f"<b>{esc(r.label)}</b><br><span class='small mono'>{esc(r.id)}</span>",
                f"{r.low:,}",
                f"{r.high:,}",
                gb_range(r.low, r.high),
                gib_range(r.low, r.high),
                f"<span class='small'>= {esc(r.formula)}<br>{esc(r.kind)}, {esc(r.group)}, "
                f"live in {esc(phases)} — source {cites.ref(r.source)}</span>",
            ]
        )
    return out


def ledger_section(c: ReportContent) -> str:
    est = c.est
    h = est.heaviest
    cites = Citations()
    out = [heading(1, f"Per-rank ledger — heaviest stage {est.heaviest_stage}", "ledger")]
    out.append(
        f'<p class="small">Stage {h.stage} holds layers {h.layers.start}–{h.layers.stop - 1}. '
        "Each row: low and high in bytes, GB (10⁹ B) and GiB (2³⁰ B), the formula with its "
        "numbers and the source of the rule. Rows are not all live at once: the peak is per "
        "phase (next section); the totals below add every row of a location.</p>"
    )
    totals = est.totals()
    for loc in LOCATIONS:
        rows = tuple(r for r in h.rows if r.location == loc)
        if not rows:
            continue
        t = totals[loc]
        body = _ledger_rows(rows, cites)
        body.append(
            [
                f"<b>Σ {len(rows)} rows</b>",
                f"<b>{t.low:,}</b>",
                f"<b>{t.high:,}</b>",
                f"<b>{gb_range(t.low, t.high)}</b>",
                f"<b>{gib_range(t.low, t.high)}</b>",
                "",
            ]
        )
        out.append(f"<h2>{esc(LOCATION_TITLES[loc])}</h2>")
        out.append(
            table(
                ["Row", "Low (B)", "High (B)", "GB", "GiB", "Formula, kind, source"],
                body,
                [21, 12, 12, 9, 9, 37],
                numeric={1, 2, 3, 4},
                font_pt=7,
            )
        )
    out.append(cites.html())
    return "".join(out)


METHOD_RESERVED = (
    "Allocated memory is what the training step's tensors occupy at its busiest moment. "
    "Reserved memory is what PyTorch holds on the card at that moment: the allocated tensors "
    "plus blocks it keeps cached for reuse, which it hands back before it would run out. "
    "Device memory is what the card shows in use: reserved plus the CUDA context, NCCL and "
    "library buffers — and a job fails only when the live tensors, the cached space the "
    "allocator cannot hand back and that outside memory together exceed the card."
)
"""The report's method text on reserved memory (the README's three sentences)."""


def phases_section(c: ReportContent) -> str:
    est, units = c.est, c.units
    h = est.heaviest
    out = [heading(1, "Charts and the step timeline", "charts")]
    out.append(chart("ledger", CHART_WIDTH, LEDGER_CHART_HEIGHT))
    groups, spread = panel_groups(panels(c.pf.plan, est))
    legend = legend_html(groups, spread)
    out.append(f"<p class='small' align='center'>{legend}</p>")
    out.append(
        '<p class="small">HBM per rank of the heaviest stage at each phase\'s peak moment '
        "as the fit test counts it (live tensors, the fragmentation the allocator cannot "
        "release and the memory outside PyTorch), with the allocator cache it releases "
        "before an out-of-memory outlined above; "
        "host RAM per node and one rank's share; NVMe per node.</p>"
    )
    out.append(f'<p class="small">{METHOD_RESERVED}</p>')
    rows = []
    for ph in PHASES:
        a = h.phases[ph]
        r = h.reserved_phases.get(ph, a)
        mark = "▲ the peak" if ph == h.peak_phase else ""
        rows.append([esc(ph), size(a.low, a.high, units), size(r.low, r.high, units), mark])
    out.append("<h2>HBM per phase</h2>")
    out.append(
        table(
            ["Phase", "Allocated (tensors)", "Reserved (allocator)", "Peak phase"],
            rows,
            [16, 35, 35, 14],
        )
    )
    if h.moments:
        mrows = [
            [esc(m), size(r.low, r.high, units), f"{r.low:,}", f"{r.high:,}"]
            for m, r in h.moments.items()
        ]
        out.append("<h3>Moments of the step (allocated)</h3>")
        out.append(
            table(
                ["Moment", "Allocated", "Low (B)", "High (B)"],
                mrows,
                [22, 38, 20, 20],
                numeric={2, 3},
            )
        )
    out.append("<h3>Peaks of the heaviest rank</h3>")
    out.append(
        figures_table(
            [
                ("Allocated (max_memory_allocated)", h.peak.low, h.peak.high),
                ("Reserved (max_memory_reserved)", h.reserved_peak.low, h.reserved_peak.high),
                ("On the device (nvidia-smi)", h.device_peak.low, h.device_peak.high),
                ("Compared with the capacity", h.fit_peak.low, h.fit_peak.high),
            ],
            units,
        )
    )
    if len(est.stages) > 1:
        out.append(stages_html(est, units))
    return "".join(out)


def stages_html(est: Estimate, units: UnitChoice) -> str:
    rows = [
        [
            f"{s.stage}" + (" ▲" if s.stage == est.heaviest_stage else ""),
            f"{s.layers.start}–{s.layers.stop - 1}",
            esc(s.peak_phase),
            size(s.peak.low, s.peak.high, units),
            size(s.fit_peak.low, s.fit_peak.high, units),
        ]
        for s in est.stages
    ]
    return (
        heading(2, "Pipeline stages")
        + chart("stages", CHART_WIDTH, STAGES_CHART_HEIGHT)
        + table(
            ["Stage", "Layers", "Peak phase", "Allocated peak", "Fit peak"],
            rows,
            [10, 12, 14, 32, 32],
        )
    )


def _node_rows(rows: tuple[Row, ...], nodes: int) -> list[list[str]]:
    return [
        [
            f"{esc(r.label)}<br><span class='small mono'>{esc(r.id)}</span>",
            f"{r.low:,}",
            f"{r.high:,}",
            gb_range(r.low, r.high),
            gib_range(r.low, r.high),
            gb_range(r.low * nodes, r.high * nodes) if r.scope != "job" else "(job)",
        ]
        for r in rows
    ]


def nodes_section(c: ReportContent) -> str:
    n, units = c.est.nodes, c.units
    v = n.view
    out = [heading(1, "Host RAM, NVMe and checkpoint storage", "nodes")]
    out.append(
        f'<p class="small">Per node: the busiest of {v.nodes} node(s), {v.ranks_per_node} '
        f"ranks on it. The aggregate multiplies by {v.nodes} node(s), i.e. assumes every "
        "node as busy as the busiest (an upper bound when stages offload unevenly).</p>"
    )
    heads = ["Row", "Low (B)", "High (B)", "GB", "GiB", f"× {v.nodes} nodes, GB"]
    for title, rows, peak, cap in (
        ("Host RAM per node", n.host, n.host_peak, n.host_capacity),
        ("NVMe per node", n.nvme, n.nvme_peak, n.nvme_capacity),
    ):
        out.append(f"<h2>{title}</h2>")
        if rows:
            out.append(
                table(
                    heads,
                    _node_rows(rows, v.nodes),
                    [30, 14, 14, 12, 12, 18],
                    numeric={1, 2, 3, 4, 5},
                )
            )
        else:
            out.append('<p class="muted">No rows: nothing is placed here.</p>')
        lo, hi = peak
        figs = [
            ("Peak per node", lo, hi),
            ("Capacity per node", cap, cap),
            ("One rank's share", lo // v.ranks_per_node, hi // v.ranks_per_node),
            (f"Aggregate × {v.nodes} node(s)", lo * v.nodes, hi * v.nodes),
        ]
        if title.startswith("Host"):
            figs.append(("Pinned host memory per node", n.pinned, n.pinned))
        out.append(figures_table(figs, units))
    out.append("<h2>Checkpoint storage (shared file system, whole job)</h2>")
    if n.checkpoint:
        out.append(
            table(
                heads[:5],
                [r[:5] for r in _node_rows(n.checkpoint, 1)],
                [40, 16, 16, 14, 14],
                numeric={1, 2, 3, 4},
            )
        )
    cl, ch = n.checkpoint_peak
    out.append(figures_table([("Peak while saving (retained + in flight)", cl, ch)], units))
    t = n.transfers
    out.append(
        f"<h3>Offload traffic per step</h3><p style='font-size: 8pt'>{esc(t.verdict)}"
        + "".join(f"<br>{esc(line)}" for line in t.lines)
        + "</p>"
    )
    return "".join(out)
