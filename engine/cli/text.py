"""Plain text for the terminal: the ledger tables of an Estimate, the per-node ledgers,
the three GPU counts and what fits the plan's layout (all from ``engine.analysis``)."""

from __future__ import annotations

from engine.analysis import FitLimits
from engine.estimate import VERDICT_WORDS, Estimate, StageEstimate
from engine.layout import Count, GpuCounts
from engine.layout.counts import validation_range
from engine.layout.levers import Lever
from engine.layout.point import rounding_noun, step_words
from engine.ledger.nodes.communication import Communication
from engine.ledger.nodes.ledgers import NodeLedgers
from engine.ledger.row import LOCATIONS, PHASES, Row
from engine.units import UnitChoice, fmt_bytes, fmt_range


def table(headers: list[str], rows: list[list[str]], right: set[int]) -> str:
    """Columns padded to their widest cell; the ``right`` columns (numbers) right-aligned."""
    widths = [
        max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)
    ]

    def fmt(cells: list[str]) -> str:
        return "  ".join(
            c.rjust(w) if i in right else c.ljust(w)
            for i, (c, w) in enumerate(zip(cells, widths, strict=True))
        ).rstrip()

    lines = [fmt(headers), fmt(["-" * w for w in widths])]
    lines.extend(fmt(r) for r in rows)
    return "\n".join(lines)


def stage_table(stage: StageEstimate, units: UnitChoice, with_formulas: bool = False) -> str:
    headers = ["row", "location", "kind", "low bytes", "high bytes", "size"]
    body = []
    for r in stage.rows:
        body.append(
            [r.id, r.location, r.kind, f"{r.low:,}", f"{r.high:,}", fmt_range(r.low, r.high, units)]
        )
        if with_formulas:
            body.append([f"  = {r.formula}", "", "", "", "", ""])
            body.append([f"  source: {r.source}", "", "", "", "", ""])
    return table(headers, body, {3, 4})


def render(
    est: Estimate,
    units: UnitChoice = "both",
    stages: bool = False,
    phases: bool = False,
    formulas: bool = False,
) -> str:
    """The human-readable report printed by ``memplan estimate``."""
    heavy = est.heaviest
    out = [
        f"MemPlan estimate — config {est.config_hash[:12]}, {est.world_size} ranks, "
        f"heaviest pipeline stage {est.heaviest_stage} ({_layer_words(heavy.layers)})",
        "",
        "Per-rank ledger (heaviest stage):",
        stage_table(heavy, units, formulas),
        "",
        "Sum of every ledger row per rank, by location (rows live at different moments "
        "add up here: a sum, not a peak — the peaks are below):",
    ]
    for loc in LOCATIONS:
        t = heavy.location_total(loc)
        if t.high:
            out.append(f"  {loc:<10} {fmt_range(t.low, t.high, units)}  ({t.low:,}–{t.high:,} B)")
    if phases:
        out += [
            "",
            "HBM per phase (allocated = tensors, as max_memory_allocated; reserved adds the "
            "allocator reserve):",
        ]
        for ph in PHASES:
            r = heavy.phases[ph]
            rr = heavy.reserved_phases.get(ph, r)
            mark = "  ← peak" if ph == heavy.peak_phase else ""
            out.append(
                f"  {ph:<11} allocated {fmt_range(r.low, r.high, units)}; "
                f"reserved {fmt_range(rr.low, rr.high, units)}{mark}"
            )
        if heavy.moments:
            out.append("  moments (allocated):")
            for m, r in heavy.moments.items():
                out.append(f"    {m:<16} {fmt_range(r.low, r.high, units)}")
    if len(est.stages) > 1:
        out += ["", render_stage_summary(est, units)]
    if stages and len(est.stages) > 1:
        for s in est.stages:
            out += ["", f"Stage {s.stage} ledger:", stage_table(s, units, formulas)]
    out += ["", render_nodes(est.nodes, units)]
    if est.nodes.communication is not None:
        out += ["", render_communication(est.nodes.communication, units)]
    out += ["", f"Batch per step: {est.batch.identity()}"]
    out += [
        "",
        f"HBM peak per rank: allocated {fmt_range(heavy.peak.low, heavy.peak.high, units)} "
        f"in phase '{heavy.peak_phase}'",
        "  reserved (allocator) "
        f"{fmt_range(heavy.reserved_peak.low, heavy.reserved_peak.high, units)}"
        f"; on the device with CUDA context, NCCL, cuBLAS "
        f"{fmt_range(heavy.device_peak.low, heavy.device_peak.high, units)}",
        f"What the verdict compares: {fmt_range(est.fit_peak.low, est.fit_peak.high, units)} "
        "per rank (live tensors + fragmentation the allocator cannot release + memory "
        "outside PyTorch, heaviest rank)",
        f"  against the limit after headroom {fmt_bytes(est.limit_bytes, units)} "
        f"(capacity {fmt_bytes(est.capacity_bytes, units)})",
        f"Verdict: {VERDICT_WORDS[est.verdict]} — {est.verdict_reason}",
    ]
    out += [f"Note: {n}" for n in est.notes]
    return "\n".join(out)


def _layer_words(layers: range, count: bool = False) -> str:
    n = len(layers)
    if n == 0:
        return "no decoder layers"
    span = f"layers {layers.start}–{layers.stop - 1}"
    return f"{n:>3} {span}" if count else span


def render_stage_summary(est: Estimate, units: UnitChoice) -> str:
    """Every pipeline stage on one line each: its layers, its allocated peak and what
    must fit; the heaviest (by what must fit) decides the verdict."""
    out = ["Per stage (HBM per rank; the heaviest decides):"]
    for s in est.stages:
        mark = "  ← heaviest" if s.stage == est.heaviest_stage else ""
        out.append(
            f"  stage {s.stage:<3} {_layer_words(s.layers, count=True)}: allocated "
            f"{fmt_range(s.peak.low, s.peak.high, units)}, must fit "
            f"{fmt_range(s.fit_peak.low, s.fit_peak.high, units)}{mark}"
        )
    return "\n".join(out)


def _lines(title: str, rows: tuple[Row, ...], units: UnitChoice) -> list[str]:
    out = [title]
    if not rows:
        return [*out, "  (none)"]
    width = max(len(r.id) for r in rows)
    out += [f"  {r.id:<{width}}  {fmt_range(r.low, r.high, units)}" for r in rows]
    return out


def render_nodes(n: NodeLedgers, units: UnitChoice) -> str:
    """The three non-HBM ledgers, per node and per rank, with their fit."""
    r = n.view.ranks_per_node
    hl, hh = n.host_peak
    nl, nh = n.nvme_peak
    cl, ch = n.checkpoint_peak
    out = _lines(
        f"Host RAM per node ({r} ranks on the busiest of {n.view.nodes} node(s)):", n.host, units
    )
    out += [
        f"  peak per node {fmt_range(hl, hh, units)} of {fmt_bytes(n.host_capacity, units)};"
        f" per rank share {fmt_range(hl // r, hh // r, units)}; pinned "
        f"{fmt_bytes(n.pinned, units)}",
        "",
    ]
    out += _lines("NVMe per node:", n.nvme, units)
    out += [
        f"  peak per node {fmt_range(nl, nh, units)} of "
        f"{fmt_bytes(n.nvme_capacity, units)}; per rank share "
        f"{fmt_range(nl // r, nh // r, units)}",
        "",
    ]
    out += _lines("Checkpoint storage (shared file system, whole job):", n.checkpoint, units)
    out += [f"  peak while saving {fmt_range(cl, ch, units)}", ""]
    t = n.transfers
    out.append(f"Offload traffic per step: {t.verdict}")
    out += [f"  {line}" for line in t.lines]
    if t.device_host_seconds is not None:
        out.append(f"  device↔host lower bound {t.device_host_seconds:.3f} s per step")
    if t.host_nvme_seconds is not None:
        out.append(f"  host↔NVMe lower bound {t.host_nvme_seconds:.3f} s per step")
    return "\n".join(out)


def render_communication(c: Communication, units: UnitChoice) -> str:
    """The step's collectives for one rank of the busiest stage, and the time floor."""
    out = [f"Communication per step (one rank of stage {c.stage}; bytes it sends, not HBM):"]
    if not c.transfers:
        out.append("  (none: a single rank with no parallel group)")
    for t in c.transfers:
        out.append(
            f"  {t.what}: {t.times} × {t.collective} over {t.group} — node links "
            f"{fmt_bytes(t.intra, units)}, network {fmt_bytes(t.inter, units)}"
        )
    out.append(
        f"  total: node links {fmt_bytes(c.intra_bytes, units)} at {c.intra_gbps:g} GB/s "
        f"≥ {c.intra_seconds:.3f} s; network {fmt_bytes(c.inter_bytes, units)} at "
        f"{c.inter_gbps:g} GB/s ≥ {c.inter_seconds:.3f} s"
    )
    out.append(
        f"  floor {c.floor_seconds:.3f} s per step: bytes ÷ peak link bandwidth, both links "
        "busy at once, no latency — a lower bound, never a throughput promise"
    )
    return "\n".join(out)


def _count_line(title: str, c: Count) -> str:
    head = f"{c.gpus} GPU{'s' * (c.gpus != 1)}" if c.gpus is not None else "none found"
    return f"  {title}: {head}\n    {c.reason}"


def _own_line(counts: GpuCounts) -> list[str]:
    own = counts.plan_layout
    if own is None:
        return []
    lay = own.layout
    if not own.ok:
        return [f"  The plan's own layout {lay.label()}: cannot be estimated: {own.error}"]
    verdict = "fits" if own.fits_high else "does not fit"
    nodes = "".join(f"; {p}" for p in own.node_problems)
    chosen = " — the chosen layout" if own.fits_high else ""
    return [
        f"  The plan's own layout {lay.label()} on {lay.world_size} ranks {verdict}: high "
        f"{fmt_bytes(own.high)} per rank, limit {fmt_bytes(own.limit)}{nodes}{chosen}"
    ]


def render_counts(counts: GpuCounts) -> str:
    """The three counts, the plan's own layout, alternatives and the rejections."""
    validation = validation_range(counts)
    out = [
        f"GPU counts (searched up to {counts.max_gpus} GPUs, {counts.gpus_per_node} per node, "
        f"rounding to {rounding_noun(counts.rounding)}; {counts.estimates} estimates):",
        *_own_line(counts),
        _count_line("1. arithmetic minimum", counts.arithmetic_min),
        _count_line("2. first legal layout (procurement)", counts.first_layout),
        f"  3. validation range: {validation}\n    {counts.validation_reason}",
    ]
    if counts.alternatives:
        out.append("  Alternatives at the procurement size, by headroom:")
        out += [
            f"    {o.layout.label()}: peak {fmt_bytes(o.high)}, headroom {fmt_bytes(o.headroom)}"
            f"; global batch {step_words(o.layout.global_batch, counts.seq_len)}"
            + ("" if o.layout.global_batch == counts.plan_batch else " (not the plan's)")
            for o in counts.alternatives
        ]
    if counts.rejected:
        top = "; ".join(f"{why} (×{n})" for why, n in counts.rejection_summary())
        out.append(
            f"  {len(counts.rejected)} layout(s) of that size rejected (memplan layouts "
            f"--gpus N lists them with reasons); most often: {top}"
        )
    out += [f"  Note: {n}" for n in counts.notes]
    return "\n".join(out)


def render_levers(levers: tuple[Lever, ...], base: GpuCounts) -> str:
    """Each fit lever with the count it would give and its cost in words."""
    if not levers:
        return "Fit levers: none left to pull (the plan already uses them)"
    was = base.first_layout.gpus
    out = [
        f"Fit levers (alternatives, not applied; the plan's procurement count: "
        f"{was if was is not None else 'none found'}):"
    ]
    for lv in levers:
        if lv.cannot_run is not None:
            got = f"cannot run: {lv.cannot_run}"
        elif lv.counts is None or lv.gpus is None:
            got = "still nothing fits within the search bound"
        else:
            c = lv.counts
            lay = c.first_layout.layout
            got = (
                f"procure {lv.gpus} GPU{'s' * (lv.gpus != 1)}"
                + (f" ({lay.label()})" if lay else "")
                + f", arithmetic minimum {c.arithmetic_min.gpus}"
            )
        changes = ", ".join(f"{k}={v}" for k, v in lv.changes)
        out.append(f"  {lv.name} ({changes}): {got}")
        out.append(f"    cost: {lv.cost}")
    return "\n".join(out)


def render_fit(fit: FitLimits) -> str:
    """The largest micro-batch and the longest sequence that fit the plan's layout."""
    lay = fit.layout
    out = [
        f"What fits the plan's layout ({lay.label()}, {lay.world_size} ranks) by the high "
        f"estimate, one input grown at a time:"
    ]
    for title, r in (("largest micro-batch", fit.micro_batch), ("longest sequence", fit.sequence)):
        out.append(f"  {title}: {r.answer}")
        out.append(f"    {r.reason}; searched {r.searched}")
    return "\n".join(out)
