"""What to measure: the assumption inputs and every row with a range, the validation plan
(what a measured run must meet to confirm the estimate, and what breaks it), and the
measured results when the plan holds records — GPU runs as measured, traces as
simulated measurements (``trace_results``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from engine.estimate import Range
from engine.layout.shapes import layout_of
from engine.ledger.row import Row
from engine.plan import get_value
from engine.units import UnitChoice, fmt_bytes, fmt_gb
from engine.validation.published import suite_summary
from engine.validation.reconcile import runtime_range
from engine.workload import compile_note, step_tokens
from gui.report.content import ReportContent
from gui.report.html import esc, heading, size, table
from gui.report.inputs import section_inputs, show
from gui.report.sections.recommendation import validation_target

if TYPE_CHECKING:
    from engine.validation.reconcile import Figure

ASSUMPTION_INPUTS: tuple[str, ...] = (
    "runtime.reserve_model",
    "runtime.allocator_reserve",
    "runtime.fragmentation",
    "runtime.side_stream_cache",
    "runtime.expandable_segments",
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
    "workload.packing",
    "workload.mean_sample_tokens",
    "workload.torch_compile",
)
"""Inputs that are assumptions about the software stack, not facts of the model."""


def _workload_note(c: ReportContent) -> str:
    """Tokens per step (real and computed) and, when compiled, what is not modelled."""
    t = step_tokens(c.pf.plan)
    padding = f", {t.padding_share:.0%} of them padding" if t.padding_share > 0 else ""
    text = (
        f"<p class='small'>Tokens per optimizer step: {t.samples:,} samples, "
        f"<b>{t.real:,} real tokens</b>; {t.positions:,} token positions computed{padding}.</p>"
    )
    note = compile_note(c.pf.plan)
    return text + (f"<p class='small'><b>Not modelled:</b> {esc(note)}</p>" if note else "")


def published_note() -> str:
    """Method: how MemPlan compares with published real-GPU runs (the figures are the
    suite's, worked out by the engine when the report is built)."""
    s = suite_summary()
    if s is None:
        return ""
    return (
        "<p class='small'><b>Method check:</b> MemPlan is compared with published "
        f"real-GPU measurements (<span class='mono'>memplan validate-published</span>): "
        f"{esc(s.line())}.</p>"
    )


def _uncertain_rows(c: ReportContent) -> list[Row]:
    n = c.est.nodes
    rows = [*c.est.heaviest.rows, *n.host, *n.nvme, *n.checkpoint]
    return sorted((r for r in rows if r.low != r.high), key=lambda r: r.low - r.high)


def assumptions_section(c: ReportContent) -> str:
    plan = c.pf.plan
    out = [heading(1, "Assumptions and unverified rows", "assumptions")]
    out.append(
        '<p class="small">Inputs that are assumptions about the software stack. '
        "Each is a range the probe can measure; <i>default</i> means the plan "
        "relies on MemPlan's built-in value.</p>"
    )
    out.append(published_note())
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
    out.append(_workload_note(c))
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


def device_threshold(high: int, capacity: int, u: UnitChoice) -> str:
    """The device figure's threshold: the high estimate, or capacity when the high
    estimate is above it (a straddling layout: the measurement decides), never both at
    once ("≤ 94.43 GB and ≤ capacity 84.93 GB" read as two answers)."""
    if high <= capacity:
        return f"≤ {fmt_bytes(high, u)} (capacity {fmt_bytes(capacity, u)})"
    return (
        f"≤ capacity {fmt_bytes(capacity, u)} — the high estimate "
        f"{fmt_bytes(high, u)} is above it: this measurement decides"
    )


def validation_plan(c: ReportContent) -> str:
    """The measurements that confirm or refute the estimate, on the layout the
    recommendation says to measure (:func:`validation_target`): the low end of a
    straddling range, else the recommended layout — never a failing plan's own."""
    target = validation_target(c)
    est, u = target.est, c.units
    h = est.heaviest
    rt = runtime_range(h) or (0, 0)
    ck = h.reserved_phases.get("checkpoint", h.reserved_peak)
    hl, hh = est.nodes.host_peak
    cl, ch = est.nodes.checkpoint_peak

    def rng(r: Range | tuple[int, int]) -> str:
        lo, hi = (r.low, r.high) if isinstance(r, Range) else r
        return f"{size(lo, hi, u)}<br><span class='small'>low {lo:,} B<br>high {hi:,} B</span>"

    acc = c.pf.plan.acceptance
    tol = acc.peak_tolerance_percent
    inside = "inside [low, high]" if not tol else f"inside [low − {tol:g} %, high + {tol:g} %]"
    growth = (
        "equals the measured one"
        if not acc.max_peak_growth_percent
        else f"exceeds the measured one by at most {acc.max_peak_growth_percent:g} %"
    )
    window = (
        f"{acc.warmup_steps} warm-up + {acc.measured_steps} measured steps, "
        f"then {acc.steady_window_steps}"
    )

    rows = [
        [
            "Peak allocated — torch.cuda.max_memory_allocated()",
            rng(h.peak),
            inside,
            "above high: the ledger misses tensors; below low: it over-counts (calibrate)",
        ],
        [
            "Peak reserved — torch.cuda.max_memory_reserved()",
            rng(h.reserved_peak),
            f"≤ {fmt_bytes(h.reserved_peak.high, u)}",
            "above high: fragmentation beyond the allocator model; raise "
            "runtime.fragmentation or runtime.side_stream_cache, or set expandable_segments",
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
            device_threshold(h.device_peak.high, est.capacity_bytes, u),
            "above capacity: the plan does not fit",
        ],
        [
            f"Steady-state window — {window}",
            "same peaks",
            f"the peak of the {acc.steady_window_steps}-step window {growth}",
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
        heading(2, "Validation plan")
        + f"<p><b>Measure {esc(target.layout.label())} on {target.gpus:,} "
        f"GPU{'s' * (target.gpus != 1)}</b> — {esc(target.why)}"
        + (
            ""
            if target.layout == layout_of(c.pf.plan)
            else " (apply it to the plan first: the thresholds below are its estimate, "
            "not the plan's own layout's)"
        )
        + ".</p><p style='font-size: 8pt'>Measure one representative micro-batch on the "
        "pinned software stack, on the ranks of the heaviest stage "
        f"(stage {est.heaviest_stage}), with that layout's batch geometry. Generate the probe "
        "with <span class='mono'>memplan probe PLAN.memplan -o memplan_probe.py</span>, "
        "call <span class='mono'>probe.step()</span> after every optimizer step, then "
        "compare with <span class='mono'>memplan validate-run PLAN.memplan "
        "memplan_records/</span>. The estimate is <b>confirmed</b> when every figure meets "
        "its threshold and <b>refuted</b> when one breaks it. The thresholds are the "
        "plan's acceptance inputs (Hardware tab → Acceptance thresholds).</p>"
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
    traces = sum(1 for r in rec.ranks if r.record.simulated)
    kinds = (
        f" — {traces} of them a simulated measurement (trace), shown apart from GPU runs"
        if traces
        else ""
    )
    out.append(
        f"<p>{len(rec.ranks)} record(s), {inside} inside the estimated range{kinds} "
        "(error = measured − estimate mid, in % of measured).</p>"
    )
    out += [f"<p><b>Warning:</b> {esc(w)}</p>" for w in rec.warnings]
    out += [f'<p class="small">Note: {esc(n)}</p>' for n in rec.notes]
    # the trace code only for a plan with measured runs (a trace is one of them)
    from gui.report.sections.trace_results import newest_trace_result, trace_block

    newest = newest_trace_result(c)
    for r in rec.ranks:
        if r.record.simulated:
            out.append(trace_block(c, r, newest=r is newest))
            continue
        out.append(f"<h3>{esc(r.record.title)} — stage {r.stage}: {esc(r.verdict)} — GPU run</h3>")
        out.append(
            table(
                ["Figure", "Measured (B)", "Estimate low–high (B)", "Error", "Verdict"],
                [_figure_row(f) for f in (*r.figures, *r.categories)],
                [18, 20, 32, 12, 18],
                numeric={1, 2, 3},
            )
        )
    return "".join(out)
