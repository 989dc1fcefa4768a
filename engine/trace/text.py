"""A trace beside the ledger as plain text (``memplan trace``), one number per line.

Pure formatting of :mod:`engine.trace.compare`; bytes in GB and GiB like the rest of
MemPlan. Every view that shows a trace (terminal, window, report) formats the same
:class:`~engine.trace.compare.Comparison`.
"""

from __future__ import annotations

from engine.trace.compare import Comparison, Line
from engine.trace.reserved import TraceReplay, replay_text
from engine.trace.result import CATEGORY_LABELS, TraceResult
from engine.units import UnitChoice, fmt_bytes, fmt_range


def _verdict(line: Line) -> str:
    if line.split_apart:  # a classification difference: the sum's row judges it
        return f"split apart: see {line.judged_in}"
    if line.inside is None:
        return "no ledger row"
    return "inside" if line.inside else ("ledger high" if line.traced < line.low else "ABOVE")  # type: ignore[operator]


def _error(line: Line) -> str:
    err = line.error_percent
    if err is not None and line.split_apart:
        return f"({err:+.1f} %)"  # not an error: the sum's row is
    return "—" if err is None else f"{err:+.1f} %"


def _row(line: Line, units: UnitChoice, width: int) -> str:
    ledger = "—" if line.low is None or line.high is None else fmt_range(line.low, line.high, units)
    return (
        f"  {line.name:<{width}} {fmt_bytes(line.traced, units):>24}   {ledger:>34}  "
        f"{_error(line):>8}  {_verdict(line)}"
    )


def header(result: TraceResult) -> list[str]:
    s, v = result.setup, result.versions
    libraries = " · ".join(
        f"{name} {v[name]}"
        for name in ("torch", "torchtitan", "megatron-core", "deepspeed", "transformers", "peft")
        if name in v
    )
    tensors = "" if "real cpu tensors" in s.tracker else ", fake cpu tensors"  # DeepSpeed's
    return [
        f"Trace: {s.model_type} — {s.strategy}, rank {s.rank} of {s.world_size} "
        f"({s.tracker}{tensors}, {s.rounding_bytes}-B rounding)",
        f"  {libraries} · {s.steps} steps in {result.wall_seconds:.1f} s, step {s.steps} reported",
        f"  {s.n_params:,} parameters ({s.n_trainable:,} trainable), {s.param_dtype} "
        f"parameters, {s.compute_dtype} compute, attention {s.attention}, recompute "
        f"{s.recompute}, {s.optimizer}, {s.micro_batches} micro-batch(es) per step",
    ]


def reserved_lines(
    replayed: TraceReplay | None,
    ledger_reserved: tuple[int, int] | None,
    traced: int,
    units: UnitChoice,
) -> list[str]:
    """The replay's reserved figures beside the ledger's reserved range."""
    if replayed is None:
        return []
    lines = ["", *replay_text(replayed, traced, units)]
    if ledger_reserved is not None:
        low, high = ledger_reserved
        res = replayed.result.peak_reserved
        where = (
            "inside it"
            if low <= res <= high
            else ("below its low" if res < low else "ABOVE its high")
        )
        lines.append(f"  ledger reserved {fmt_range(low, high, units)} — the replay lies {where}")
    return lines


def render(
    result: TraceResult,
    cmp: Comparison,
    units: UnitChoice = "both",
    replayed: TraceReplay | None = None,
    ledger_reserved: tuple[int, int] | None = None,
) -> str:
    """The trace and the ledger side by side (error = ledger mid − traced), and the
    allocator replay's reserved figures beside the ledger's reserved range."""
    peak = cmp.peak
    lines = header(result)
    lines += [
        "",
        f"Traced peak allocated: {fmt_bytes(peak.traced, units)} in "
        f"{result.peak_phase.phase} ({result.peak_phase.moment})",
        f"Ledger estimate:       {fmt_range(peak.low or 0, peak.high or 0, units)} — "
        f"{_verdict(peak)}, error {_error(peak)} (ledger mid − traced)",
        *reserved_lines(replayed, ledger_reserved, peak.traced, units),
        "",
        "At the peak, by ledger group (trace categories summed in):",
    ]
    width = max(12, *(len(g.name) for g in cmp.groups))
    head = f"  {'group':<{width}} {'traced':>24}   {'ledger low–high':>34}  {'error':>8}"
    lines.append(head)
    for line in cmp.groups:
        lines.append(_row(line, units, width))
        lines += [
            f"  {'':<{width}}   {fmt_bytes(v, units):>22}   {CATEGORY_LABELS.get(c, c)}"
            for c, v in line.parts
            if len(line.parts) > 1 or c != line.name
        ]
    lines += ["", "Each phase's peak (steady: what stays live after zero_grad):", head]
    lines += [_row(line, units, width) for line in cmp.phases]
    ms = result.model_states
    lines += [
        "",
        f"Saved activations after forward: {fmt_bytes(result.saved_activations, units)}",
        "Model states on this rank: "
        + ", ".join(f"{k.replace('_', ' ')} {fmt_bytes(v, units)}" for k, v in ms.items()),
    ]
    lines += [f"note: {n}" for n in result.notes]
    return "\n".join(lines)


def _gap(line: Line) -> int:
    """How far the traced figure lies outside the ledger's range (all of it when the
    ledger has no row)."""
    if line.low is None or line.high is None:
        return line.traced
    return max(line.traced - line.high, line.low - line.traced, 0)


def differences(cmp: Comparison, units: UnitChoice = "both") -> list[str]:
    """Where the trace and the ledger differ, one sentence each, the largest gap first:
    every figure (peak, ledger group, phase) outside the ledger's range or without a
    ledger row. The window and the report say this above their tables."""
    lines = [
        (kind, line)
        for kind, group in (("", (cmp.peak,)), ("group ", cmp.groups), ("phase ", cmp.phases))
        for line in group
        if _gap(line) > 0
    ]
    if not lines:
        return ["every traced figure lies inside the ledger's range"]
    out = []
    for kind, line in sorted(lines, key=lambda item: -_gap(item[1])):
        traced = fmt_bytes(line.traced, units)
        if line.low is None or line.high is None:
            text = f"{kind}{line.name}: traced {traced}, which no ledger row counts"
        else:
            side = "above the ledger's high" if line.traced > line.high else "below its low"
            error = "" if line.error_percent is None else f"; error {_error(line)}"
            text = (
                f"{kind}{line.name}: traced {traced}, {fmt_bytes(_gap(line), units)} {side} "
                f"({fmt_range(line.low, line.high, units)}{error})"
            )
        out.append(text + (f" — {line.detail}" if line.detail and kind == "group " else ""))
    return out


def stale_warning(traced_hash: str | None, plan_hash: str) -> str | None:
    """The warning line when a trace was taken of another version of the plan."""
    if traced_hash == plan_hash:
        return None
    traced = (traced_hash or "unknown")[:12]
    return (
        f"WARNING: traced for config {traced}, but this plan is {plan_hash[:12]}: the plan "
        "changed since the trace (trace it again to compare like with like)"
    )


def summary(
    result: TraceResult,
    cmp: Comparison,
    traced_hash: str | None,
    plan_hash: str,
    units: UnitChoice = "both",
    replayed: TraceReplay | None = None,
    ledger_reserved: tuple[int, int] | None = None,
) -> str:
    """A stored trace in a few lines (the window's Measured tab): the peak against the
    ledger's range, the replay's reserved beside the ledger's, and where the two differ
    first, then what was traced."""
    peak = cmp.peak
    lines = [
        f"Traced peak {fmt_bytes(peak.traced, units)} in {result.peak_phase.phase} "
        f"({result.peak_phase.moment}); ledger {fmt_range(peak.low or 0, peak.high or 0, units)}"
        f" — {_verdict(peak)}, error {_error(peak)} (ledger mid − traced)"
    ]
    lines += reserved_lines(replayed, ledger_reserved, peak.traced, units)[1:]
    warning = stale_warning(traced_hash, plan_hash)
    lines += [warning] if warning else []
    lines.append("Where the trace and the ledger differ:")
    lines += [f"  • {d}" for d in differences(cmp, units)]
    lines += header(result)
    lines += [f"note: {n}" for n in result.notes]
    return "\n".join(lines)
