"""The title page: the recommendation (what to buy, the margin, the measurement that
decides), then what was planned, its verdict, the key figures and the GPU counts.

Every number is formatted from an engine object; the exact integers are always printed
next to the rounded sizes so a reader can audit a figure against ``memplan estimate``.
"""

from __future__ import annotations

from engine.estimate import VERDICT_WORDS, Range
from engine.plan import Plan
from engine.stacks.defaults import resolve_stack_defaults, resolved, stack_label
from engine.units import UnitChoice, fmt_bytes
from gui.report.content import ReportContent
from gui.report.html import VERDICT_COLORS, esc, figures_table, kv_table, size
from gui.report.sections.layouts import counts_html
from gui.report.sections.recommendation import recommendation_html


def peak_line(label: str, r: Range, units: UnitChoice) -> str:
    """A peak with its rounded sizes and the exact low and high bytes."""
    return (
        f"<b>{esc(label)}:</b> {size(r.low, r.high, units)} "
        f'<span class="mono">(low {r.low:,} B, high {r.high:,} B)</span>'
    )


def model_line(plan: Plan) -> str:
    """The model and method, with the precision the engine computed with: the stack's
    policy when the plan leaves it at auto (a reader signs amp_master, not "auto")."""
    p = resolved(plan).method.precision
    return (
        f"{plan.model.name} — {plan.method.kind} training, {plan.method.optimizer.name}, "
        f"precision {p.policy} ({p.compute_dtype} compute, {p.grad_dtype} gradients)"
    )


def stack_line(plan: Plan) -> str:
    """The stack that decides every auto input, and how many inputs it decided."""
    r = resolve_stack_defaults(plan)
    how = "auto: from the strategy and method" if plan.stack.name == "auto" else "chosen"
    return f"{stack_label(plan)} ({how}); {len(r.derived)} inputs left at auto take its defaults"


def key_figures(c: ReportContent) -> list[tuple[str, int, int]]:
    """The figures a buyer compares: peaks per rank and per node, capacity and limit."""
    est = c.est
    h, n = est.heaviest, est.nodes
    headroom = c.pf.plan.policy.headroom_percent
    return [
        ("HBM per rank, compared with capacity", h.fit_peak.low, h.fit_peak.high),
        ("HBM allocated (max_memory_allocated)", h.peak.low, h.peak.high),
        ("HBM reserved (max_memory_reserved)", h.reserved_peak.low, h.reserved_peak.high),
        ("HBM on the device (nvidia-smi)", h.device_peak.low, h.device_peak.high),
        ("Usable HBM capacity", est.capacity_bytes, est.capacity_bytes),
        (f"Limit (capacity less {headroom:g} % headroom)", est.limit_bytes, est.limit_bytes),
        ("Host RAM per node (busiest)", *n.host_peak),
        ("NVMe per node (busiest)", *n.nvme_peak),
        ("Checkpoint storage, whole job", *n.checkpoint_peak),
    ]


def title_page(c: ReportContent) -> str:
    est, pf, plan = c.est, c.pf, c.pf.plan
    par, hw = plan.parallelism, plan.hardware
    color = VERDICT_COLORS[est.verdict]
    meta = [
        ("Generated", esc(c.generated)),
        ("Plan created / modified", esc(f"{pf.created or '—'} / {pf.modified or '—'}")),
        ("MemPlan version", esc(c.app_version)),
        ("Formula version", esc(f"{c.formula_version} (the engine's rules for every row)")),
        ("Plan schema version", esc(c.schema_version)),
        ("Config hash (SHA-256)", f'<span class="mono">{esc(est.config_hash)}</span>'),
        ("Model", esc(model_line(plan))),
        ("Training stack", esc(stack_line(plan))),
        (
            "Layout",
            esc(
                f"TP {par.tp} × PP {par.pp} × CP {par.cp} × DP {par.dp}"
                f" = {est.world_size} ranks"
                + (f" (EP {par.ep} folded over them)" if par.ep > 1 else "")
                + f", {par.strategy}"
            ),
        ),
        (
            "Hardware",
            esc(
                f"{hw.accelerator}, {hw.gpus_per_node} per node; usable "
                f"{fmt_bytes(est.capacity_bytes)} ({hw.usable_policy})"
            ),
        ),
        (
            "Batch",
            esc(
                f"sequence {plan.batch.seq_len:,}, micro-batch {plan.batch.micro_batch}, "
                f"gradient accumulation {plan.batch.grad_accum}"
            ),
        ),
    ]
    h = est.heaviest
    notes = f"<p>{esc(pf.notes)}</p>" if pf.notes else '<p class="muted">No notes in this plan.</p>'
    problems = "".join(f'<p class="muted">Not shown: {esc(p)}</p>' for p in c.problems)
    return (
        '<p class="muted" style="font-size: 9pt">MemPlan — GPU memory procurement report</p>'
        f"<h1>{esc(c.plan_name)}</h1>{recommendation_html(c)}{notes}{kv_table(meta)}"
        "<h2>The plan as written — verdict: "
        f'<span style="color: {color}">{VERDICT_WORDS[est.verdict]}</span></h2>'
        f'<p style="font-size: 8.5pt">{esc(est.verdict_reason)}</p>'
        f"<p>{peak_line('Per-rank HBM peak', h.fit_peak, c.units)}<br>"
        '<span class="small">what must fit the capacity: the live tensors, the fragmentation '
        "the allocator cannot release and the memory outside PyTorch, on the heaviest rank "
        f"(stage {est.heaviest_stage})</span></p>"
        f"{figures_table(key_figures(c), c.units)}"
        f"<h2>GPU counts</h2>{counts_html(c, reasons=False)}{problems}"
    )
