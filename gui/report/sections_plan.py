"""Report sections that act on the estimate: layouts, what to change, what to measure.

The validation plan turns the estimate's ranges into thresholds a measured run either
meets or breaks; the appendix prints the framework configs generated from the plan.
"""

from __future__ import annotations

from engine.estimate import Range
from engine.ledger.row import Row
from engine.plan import get_value
from engine.units import fmt_bytes, fmt_gb
from engine.validation.reconcile import Figure, runtime_range
from gui.report.content import ReportContent
from gui.report.html import chart, esc, heading, size, table
from gui.report.inputs import section_inputs, show
from gui.report.sections_main import CHART_WIDTH, counts_html

ASSUMPTION_INPUTS: tuple[str, ...] = (
    "runtime.allocator_reserve",
    "runtime.activation_band",
    "runtime.cuda_context_bytes",
    "runtime.nccl_bytes_per_communicator",
    "runtime.cublas_workspace_bytes",
    "host.process_rss_bytes",
    "host.dataloader_workers_per_rank",
    "host.dataloader_worker_bytes",
    "host.os_reserve_bytes",
    "hardware.usable_hbm_bytes",
    "policy.headroom_percent",
)
"""Inputs that are assumptions about the software stack, not facts of the model."""

REJECTED_SHOWN = 12


def layouts_section(c: ReportContent) -> str:
    k = c.counts
    out = [heading(1, "GPU counts and layouts", "layouts", new_page=True)]
    out.append(
        f'<p class="small">Searched up to {k.max_gpus:,} GPUs, {k.gpus_per_node} per node, '
        f"rounding to whole {k.rounding}s, {k.estimates} estimates; limit "
        f"{esc(fmt_bytes(k.limit_bytes))} per rank.</p>"
    )
    out.append(counts_html(c))
    chosen = k.first_layout.outcome
    if chosen is not None and k.first_layout.layout is not None:
        out.append("<h2>Chosen layout</h2>")
        out.append(
            table(
                ["Layout", "Peak per rank (low–high)", "Headroom at high"],
                [
                    [
                        esc(k.first_layout.layout.label()),
                        size(chosen.low, chosen.high, "both"),
                        esc(fmt_bytes(chosen.headroom)),
                    ]
                ],
                [40, 38, 22],
            )
        )
    out.append("<h2>Alternatives at the procurement size, by headroom</h2>")
    if k.alternatives:
        rows = [
            [str(i), esc(o.layout.label()), size(o.low, o.high, "both"), esc(fmt_bytes(o.headroom))]
            for i, o in enumerate(k.alternatives, start=1)
        ]
        out.append(
            table(["#", "Layout", "Peak per rank (low–high)", "Headroom"], rows, [5, 37, 38, 20])
        )
    else:
        out.append('<p class="muted">No other layout of that size fits.</p>')
    if k.rejected:
        shown = min(REJECTED_SHOWN, len(k.rejected))
        out.append(f"<h3>Rejected layouts ({len(k.rejected)}; the first {shown} shown)</h3>")
        rows = [
            [esc(r.layout.label()), esc("; ".join(r.reasons))] for r in k.rejected[:REJECTED_SHOWN]
        ]
        out.append(table(["Layout", "Why not"], rows, [35, 65]))
    out += [f'<p class="small">Note: {esc(n)}</p>' for n in k.notes]
    return "".join(out)


def diagnostics_section(c: ReportContent) -> str:
    d = c.diagnosis
    out = [heading(1, "Diagnostics and sensitivity", "diagnostics", new_page=True)]
    out.append(
        f"<p>Peak (high) {esc(fmt_bytes(d.peak_high))} against the limit "
        f"{esc(fmt_bytes(d.limit))}.</p>"
    )
    out.append("<h2>Rows that dominate the peak</h2>")
    out.append(
        table(
            ["Row", "High", "Share of peak"],
            [
                [
                    f"{esc(x.row.label)}<br><span class='small mono'>{esc(x.row.id)}</span>",
                    esc(fmt_bytes(x.row.high)),
                    f"{100 * x.share:.1f} %",
                ]
                for x in d.dominant
            ],
            [56, 28, 16],
            numeric={2},
        )
    )
    out.append("<h2>Suggestions — one change each, re-estimated</h2>")
    if d.suggestions:
        rows = [
            [
                esc(s.label),
                f"{s.saves:,} B<br>{esc(fmt_gb(s.saves or 0))}",
                esc(fmt_bytes(s.peak_high or 0)),
                "fits" if s.fits else "does not fit",
            ]
            for s in d.suggestions
        ]
        out.append(
            table(
                ["Change", "Saves (peak high)", "New peak (high)", "Then"],
                rows,
                [40, 22, 26, 12],
                numeric={1},
            )
        )
    else:
        out.append('<p class="muted">No single change lowers the peak.</p>')
    if d.not_applicable:
        out.append("<h3>Changes that do not help or cannot be estimated</h3>")
        out.append(
            table(
                ["Change", "Why"],
                [[esc(s.label), esc(s.error or "")] for s in d.not_applicable],
                [40, 60],
                font_pt=7,
            )
        )
    out.append("<h2>Sensitivity (tornado data)</h2>")
    out.append(
        '<p class="small">The plan re-estimated at each end of one uncertain input; '
        "the peak is the high fit peak per rank. Widest swing first.</p>"
    )
    if any(b.swing for b in c.tornado):
        out.append(chart("tornado", CHART_WIDTH, 26 * len(c.tornado) + 40))
    rows = []
    for b in c.tornado:
        if b.error:
            rows.append(
                [
                    esc(b.label),
                    esc(show(b.input, b.low_value)),
                    esc(show(b.input, b.high_value)),
                    "—",
                    "—",
                    esc(b.error),
                ]
            )
            continue
        rows.append(
            [
                esc(b.label),
                esc(show(b.input, b.low_value)),
                esc(show(b.input, b.high_value)),
                esc(fmt_gb(b.peak_at_low or 0)),
                esc(fmt_gb(b.peak_at_high or 0)),
                esc(fmt_gb(b.swing)),
            ]
        )
    out.append(
        table(
            ["Input", "Low end", "High end", "Peak at low", "Peak at high", "Swing"],
            rows,
            [24, 15, 15, 15, 15, 16],
            numeric={3, 4, 5},
        )
    )
    return "".join(out)


def _uncertain_rows(c: ReportContent) -> list[Row]:
    n = c.est.nodes
    rows = [*c.est.heaviest.rows, *n.host, *n.nvme, *n.checkpoint]
    return sorted((r for r in rows if r.low != r.high), key=lambda r: r.low - r.high)


def assumptions_section(c: ReportContent) -> str:
    plan = c.pf.plan
    out = [heading(1, "Assumptions and unverified rows", "assumptions", new_page=True)]
    out.append(
        '<p class="small">Inputs that are assumptions about the software stack. '
        "Each is a range the probe can measure; <i>default</i> means the plan "
        "relies on MemPlan's built-in value.</p>"
    )
    rows = []
    for path in ASSUMPTION_INPUTS:
        section = path.split(".", 1)[0]
        lines = [
            ln
            for ln in section_inputs(plan, section)
            if ln.path == path or ln.path.startswith(path + ".")
        ]
        value = esc(show(path, get_value(plan, path)))
        is_default = all(ln.is_default for ln in lines)
        desc = lines[0].description if lines else ""
        rows.append(
            [
                f"<span class='mono'>{esc(path)}</span>",
                value,
                "<span class='default'>default</span>" if is_default else "<b>set</b>",
                f"<span class='small'>{esc(desc)}</span>",
            ]
        )
    out.append(table(["Input", "Value", "", "Why it is uncertain"], rows, [27, 27, 8, 38]))
    unc = _uncertain_rows(c)
    out.append(f"<h2>Rows with a range (low ≠ high): {len(unc)}</h2>")
    if unc:
        body = [
            [
                f"{esc(r.label)}<br><span class='small mono'>{esc(r.id)}</span>",
                esc(r.location),
                f"{r.low:,}",
                f"{r.high:,}",
                esc(fmt_gb(r.high - r.low)),
            ]
            for r in unc
        ]
        out.append(
            table(
                ["Row", "Where", "Low (B)", "High (B)", "Width"],
                body,
                [40, 9, 18, 18, 15],
                numeric={2, 3, 4},
            )
        )
    return "".join(out) + validation_plan(c)


def validation_plan(c: ReportContent) -> str:
    est, u = c.est, c.units
    h = est.heaviest
    rt = runtime_range(h) or (0, 0)
    ck = h.reserved_phases.get("checkpoint", h.reserved_peak)
    hl, hh = est.nodes.host_peak
    cl, ch = est.nodes.checkpoint_peak

    def rng(r: Range | tuple[int, int]) -> str:
        lo, hi = (r.low, r.high) if isinstance(r, Range) else r
        return f"{size(lo, hi, u)}<br><span class='small'>low {lo:,} B<br>high {hi:,} B</span>"

    rows = [
        [
            "Peak allocated — torch.cuda.max_memory_allocated()",
            rng(h.peak),
            "inside [low, high]",
            "above high: the ledger misses tensors; below low: it over-counts (calibrate)",
        ],
        [
            "Peak reserved — torch.cuda.max_memory_reserved()",
            rng(h.reserved_peak),
            f"≤ {fmt_bytes(h.reserved_peak.high, u)}",
            "above high: fragmentation beyond the "
            "allocator band; widen runtime.allocator_reserve or set expandable_segments",
        ],
        [
            "Memory outside the framework — device used − reserved",
            rng(rt),
            f"≤ {fmt_bytes(rt[1], u)}",
            "above high: CUDA context, NCCL or cuBLAS larger than assumed",
        ],
        [
            "Device used — cudaMemGetInfo / nvidia-smi",
            rng(h.device_peak),
            f"≤ {fmt_bytes(h.device_peak.high, u)} and ≤ capacity "
            f"{fmt_bytes(est.capacity_bytes, u)}",
            "above capacity: the plan does not fit",
        ],
        [
            "Steady-state window — 2 warm-up + 3 measured steps, then 6",
            "same peaks",
            "the peak of the 6-step window equals the 3-step one",
            "a rising peak: a leak or fragmentation; the estimate is not a steady state",
        ],
        [
            "Checkpoint save — HBM and host RAM during the save",
            rng(ck),
            f"HBM ≤ {fmt_bytes(ck.high, u)}; host RAM per node ≤ {fmt_bytes(hh, u)}",
            "above: consolidation or staging copies not in the ledger",
        ],
        [
            "Checkpoint on disk — all retained checkpoints",
            rng((cl, ch)),
            f"≤ {fmt_bytes(ch, u)}",
            "above: formats or extra state not counted",
        ],
        [
            "Checkpoint load and reshard — resume on another DP size",
            rng(h.fit_peak),
            f"HBM ≤ {fmt_bytes(h.fit_peak.high, u)}; host RAM ≤ {fmt_bytes(hh, u)}",
            "above: the loader materialises full tensors",
        ],
    ]
    return (
        "<h2>Validation plan</h2>"
        "<p style='font-size: 8pt'>Measure one representative micro-batch on the pinned "
        "software stack, on the ranks of the heaviest stage "
        f"(stage {est.heaviest_stage}), with the plan's batch geometry. Generate the probe "
        "with <span class='mono'>memplan probe PLAN.memplan -o memplan_probe.py</span>, "
        "call <span class='mono'>probe.step()</span> after every optimizer step, then "
        "compare with <span class='mono'>memplan validate-run PLAN.memplan "
        "memplan_records/</span>. The estimate is <b>confirmed</b> when every figure meets "
        "its threshold and <b>refuted</b> when one breaks it.</p>"
        + table(
            ["What to measure", "Estimate", "Confirms", "Refutes / action"],
            rows,
            [24, 28, 22, 26],
            font_pt=7,
        )
        + f"<p class='small'>Host RAM per node (sum of RSS over the node's processes) "
        f"should stay within {size(hl, hh, u)}.</p>"
    )


def _figure_row(f: Figure) -> list[str]:
    est = "—" if f.low is None or f.high is None else f"{f.low:,}–{f.high:,}"
    pct = "—" if f.error_percent is None else f"{f.error_percent:+.1f} %"
    measured = "—" if f.measured is None else f"{f.measured:,}"
    return [esc(f.name), measured, est, pct, esc(f.verdict)]


def measured_section(c: ReportContent) -> str:
    rec = c.reconciliation
    out = [heading(2, "Measured results")]
    if rec is None:
        out.append('<p class="muted">This plan holds no measured runs yet.</p>')
        return "".join(out)
    inside = sum(1 for r in rec.ranks if r.verdict == "inside")
    out.append(
        f"<p>{len(rec.ranks)} record(s), {inside} inside the estimated range "
        "(error = measured − estimate mid, in % of measured).</p>"
    )
    out += [f"<p><b>Warning:</b> {esc(w)}</p>" for w in rec.warnings]
    out += [f'<p class="small">Note: {esc(n)}</p>' for n in rec.notes]
    for r in rec.ranks:
        out.append(f"<h3>{esc(r.record.title)} — stage {r.stage}: {esc(r.verdict)}</h3>")
        out.append(
            table(
                ["Figure", "Measured (B)", "Estimate low–high (B)", "Error", "Verdict"],
                [_figure_row(f) for f in (*r.figures, *r.categories)],
                [18, 20, 32, 12, 18],
                numeric={1, 2, 3},
            )
        )
    return "".join(out)


CODE_COLUMNS = 118
"""Characters per line of a config listing at 7 pt mono on the text width."""


def code_block(text: str) -> str:
    """A listing as one table cell of ``<br>``-separated lines, long lines wrapped with
    a ↪ continuation mark (one block, so the page layout handles it like any table)."""
    lines: list[str] = []
    for line in text.rstrip().splitlines():
        indent = len(line) - len(line.lstrip(" "))
        while len(line) > CODE_COLUMNS:
            lines.append(line[:CODE_COLUMNS])
            line = " " * indent + "↪ " + line[CODE_COLUMNS:]
        lines.append(line)
    body = "<br>".join(esc(ln).replace(" ", "&nbsp;") for ln in lines)
    return (
        '<table width="100%" cellspacing="0" cellpadding="4" style="background-color: #f4f6f8">'
        f'<tr><td class="mono" style="font-size: 7pt">{body}</td></tr></table>'
    )


def appendix_section(c: ReportContent) -> str:
    out = [heading(1, "Appendix — generated framework configuration", "appendix", new_page=True)]
    for exp in c.exports:
        out.append(f"<h2>{esc(exp.format)} — <span class='mono'>{esc(exp.filename)}</span></h2>")
        out += [f'<p class="small">Note: {esc(n)}</p>' for n in exp.notes]
        out.append(code_block(exp.text))
    return "".join(out)
