"""The exception list: what a reviewer must not miss before signing.

Three lists, each complete: every input the plan changed from its default (the model's
fields compared with the preset it names, so a 70B plan lists what differs from the 70B
preset, not every architecture field); every ledger row whose low–high range is *wide*
(at least ``wide_percent`` % of its location's peak: the rows whose uncertainty can move
the verdict); and every warning and note the engine, the layout search and the exports
raised for this plan.
"""

from __future__ import annotations

from typing import Any

from engine.ledger.row import Row
from engine.plan import Plan, default_plan
from engine.presets import model_section_for
from engine.units import fmt_bytes, fmt_range
from engine.whatif.compare import ABSENT, input_differences
from gui.report.content import ReportContent
from gui.report.html import esc, heading, table
from gui.report.inputs import all_inputs, show


def reference_plan(plan: Plan) -> tuple[Plan, str]:
    """What "default" means for each input of ``plan``, and how to say it: the built-in
    defaults, with the model section of the preset the plan names."""
    base = default_plan()
    preset = plan.model.preset
    if not preset:
        return base, "the built-in defaults"
    try:
        model = model_section_for(preset)
    except KeyError:
        return base, "the built-in defaults (the plan's model preset is unknown)"
    return base.model_copy(
        update={"model": model}
    ), f"the built-in defaults and the {preset} preset"


def changed_inputs(plan: Plan) -> list[tuple[str, Any, Any]]:
    """(path, value, default) of every leaf input that differs from its default."""
    ref, _ = reference_plan(plan)
    return [(d.path, d.values[1], d.values[0]) for d in input_differences([ref, plan])]


def wide_rows(c: ReportContent) -> list[tuple[Row, int]]:
    """Rows whose range is at least ``wide_percent`` % of their location's peak, with
    that peak, widest first."""
    est, n = c.est, c.est.nodes
    located: list[tuple[tuple[Row, ...], int]] = [
        (tuple(r for r in est.rows if r.location == "hbm"), est.fit_peak.high),
        (n.host, n.host_peak[1]),
        (n.nvme, n.nvme_peak[1]),
        (n.checkpoint, n.checkpoint_peak[1]),
    ]
    out = [
        (r, peak)
        for rows, peak in located
        for r in rows
        if peak > 0 and (r.high - r.low) * 100 >= c.wide_percent * peak
    ]
    return sorted(out, key=lambda rp: -(rp[0].high - rp[0].low) / rp[1])


def warnings(c: ReportContent) -> list[str]:
    """Every warning and note for this plan, each once, in reading order."""
    est, k = c.est, c.counts
    out: list[str] = []
    if est.verdict != "fits":
        out.append(f"Verdict: {est.verdict_reason}")
    if k.straddles:
        out.append(f"GPU counts: {k.validation_reason}")
    out += [f"Estimate: {n}" for n in est.notes]
    out += [f"Layout search: {n}" for n in k.notes]
    t = est.nodes.transfers
    if t.verdict != "no offload traffic":
        out.append(f"Offload traffic: {t.verdict}")
    out += [f"Plan file: {m}" for m in c.pf.extra_messages]
    # the exports' notes (what a config cannot say) stay with their listing in the
    # appendix: the warnings are what matters for the purchase
    out += [f"Not shown: {p}" for p in c.problems]
    return list(dict.fromkeys(out))


def _meaning(meanings: dict[str, str], path: str) -> str:
    """A field's description, or its parent's for a leaf of a range (``….low``)."""
    return meanings.get(path) or meanings.get(path.rsplit(".", 1)[0], "")


def _shown(path: str, value: Any) -> str:
    return "absent" if value is ABSENT else show(path, value)


def exceptions_section(c: ReportContent) -> str:
    plan = c.pf.plan
    _, against = reference_plan(plan)
    out = [heading(1, "Exceptions — changed inputs, wide ranges, warnings", "exceptions", True)]
    changed = changed_inputs(plan)
    meaning = {ln.path: ln.description for lines in all_inputs(plan).values() for ln in lines}
    out.append(f"<h2>Inputs changed from their defaults: {len(changed)}</h2>")
    out.append(f'<p class="small">Compared with {esc(against)}.</p>')
    if changed:
        rows = [
            [
                f'<span class="mono">{esc(path)}</span>',
                f'<span class="set">{esc(_shown(path, value))}</span>',
                esc(_shown(path, default)),
                f'<span class="small">{esc(_meaning(meaning, path))}</span>',
            ]
            for path, value, default in changed
        ]
        out.append(table(["Field", "Value", "Default", "Meaning"], rows, [30, 22, 18, 30]))
    else:
        out.append('<p class="muted">None: every input is its default.</p>')
    wide = wide_rows(c)
    out.append(f"<h2>Rows with a wide range: {len(wide)}</h2>")
    out.append(
        f'<p class="small">Wide: high − low is at least {c.wide_percent:g} % of the '
        "location's peak (HBM per rank, host RAM or NVMe per node, checkpoint storage of the "
        "job); the report input <span class='mono'>--wide-range</span> sets the share.</p>"
    )
    if wide:
        rows = [
            [
                f"{esc(r.label)}<br><span class='small mono'>{esc(r.id)}</span>",
                esc(r.location),
                esc(fmt_range(r.low, r.high, c.units)),
                esc(fmt_bytes(r.high - r.low, c.units)),
                f"{100 * (r.high - r.low) / peak:.1f} %",
            ]
            for r, peak in wide
        ]
        out.append(
            table(
                ["Row", "Where", "Low–high", "Width", "Of the peak"],
                rows,
                [32, 9, 29, 18, 12],
                numeric={4},
            )
        )
    else:
        out.append('<p class="muted">None.</p>')
    notes = warnings(c)
    out.append(f"<h2>Warnings and notes: {len(notes)}</h2>")
    if notes:
        out.append("<ul>" + "".join(f"<li>{esc(n)}</li>" for n in notes) + "</ul>")
    else:
        out.append('<p class="muted">None.</p>')
    return "".join(out)
