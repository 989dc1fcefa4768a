"""Comparing plans: verdicts, peaks and GPU counts side by side, and what differs.

An analyst weighs a plan against its edited copy, or two vendors' nodes, or LoRA
against full fine-tuning. :func:`compare` takes two or more plans and answers with
each plan's verdict, peaks and GPU counts (from ``engine.analysis``, so a plan already
analysed in the window costs nothing), the ledger rows matched by row id with each
plan's low and high bytes and the deltas against the first plan (the baseline), and
every input that differs, by dotted field path. A plan that cannot be computed is a
side with its reason, not a failed comparison.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from engine.analysis import analysis
from engine.errors import PlanError
from engine.estimate import VERDICT_WORDS, Estimate
from engine.layout.counts import SEARCH_BUDGET_S, GpuCounts, validation_range
from engine.ledger.row import Row
from engine.plan import Plan, free_json_paths
from engine.units import UnitChoice, fmt_bytes, fmt_range

Progress = Callable[[int, int], bool]
"""Called after each step with (done, total); returning False stops the comparison."""

ABSENT = object()
"""An input path one plan has and another lacks (e.g. a MoE block on a dense model)."""


@dataclass(frozen=True)
class Side:
    """One compared plan: its estimate and counts, or why they are missing."""

    name: str
    plan: Plan
    config_hash: str
    estimate: Estimate | None = None
    error: str | None = None  # why the plan cannot be estimated
    counts: GpuCounts | None = None
    counts_error: str | None = None  # why the counts are missing (not asked, failed)


@dataclass(frozen=True, slots=True)
class RowDiff:
    """One ledger row across the plans: (low, high) per plan, None where it is absent."""

    id: str
    label: str
    location: str
    values: tuple[tuple[int, int] | None, ...]

    def delta(self, side: int) -> tuple[int, int]:
        """(Δ low, Δ high) of plan ``side`` against the baseline; an absent row is 0."""
        base = self.values[0] or (0, 0)
        got = self.values[side] or (0, 0)
        return got[0] - base[0], got[1] - base[1]

    @property
    def differs(self) -> bool:
        return any(v != self.values[0] for v in self.values[1:])

    @property
    def largest_change(self) -> int:
        """The largest |Δ| of the low or high bytes against the baseline."""
        return max((abs(d) for i in range(1, len(self.values)) for d in self.delta(i)), default=0)


@dataclass(frozen=True, slots=True)
class InputDiff:
    """One input that is not the same in every plan (:data:`ABSENT` where missing)."""

    path: str
    values: tuple[Any, ...]


@dataclass(frozen=True)
class Comparison:
    """Two or more plans compared; ``sides[0]`` is the baseline of every delta."""

    sides: tuple[Side, ...]
    rows: tuple[RowDiff, ...]  # every row of any plan, in the baseline's order first
    inputs: tuple[InputDiff, ...]
    cancelled: bool = False

    @property
    def changed_rows(self) -> tuple[RowDiff, ...]:
        """The rows that differ, largest change first (ties: ledger order)."""
        changed = [r for r in self.rows if r.differs]
        return tuple(sorted(changed, key=lambda r: -r.largest_change))

    @property
    def hashes(self) -> tuple[str, ...]:
        return tuple(s.config_hash for s in self.sides)


def ledger_rows(est: Estimate) -> tuple[Row, ...]:
    """The rows a comparison matches: the heaviest rank's ledger (HBM) and the node
    ledgers (host RAM and NVMe per node, checkpoint storage of the job)."""
    n = est.nodes
    return (*est.rows, *n.host, *n.nvme, *n.checkpoint)


def _leaves(tree: Any, prefix: str, out: dict[str, Any]) -> None:
    if isinstance(tree, dict) and tree and prefix not in free_json_paths():
        for key, value in tree.items():
            _leaves(value, f"{prefix}.{key}" if prefix else key, out)
    else:
        out[prefix] = tree


def input_differences(plans: Sequence[Plan]) -> tuple[InputDiff, ...]:
    """Every leaf input (dotted path) whose value is not the same in all ``plans``,
    in the baseline's field order."""
    flat: list[dict[str, Any]] = []
    for p in plans:
        leaves: dict[str, Any] = {}
        _leaves(p.model_dump(mode="json"), "", leaves)
        flat.append(leaves)
    paths: list[str] = []
    seen: set[str] = set()
    for leaves in flat:
        for path in leaves:
            if path not in seen:
                seen.add(path)
                paths.append(path)
    out = []
    for path in paths:
        values = tuple(leaves.get(path, ABSENT) for leaves in flat)
        if any(v is ABSENT or v != values[0] for v in values[1:]):
            out.append(InputDiff(path, values))
    return tuple(out)


def row_differences(estimates: Sequence[Estimate | None]) -> tuple[RowDiff, ...]:
    """Rows matched by id across the estimates (None: a plan that could not be computed,
    whose column is then absent throughout)."""
    order: list[str] = []
    first: dict[str, Row] = {}
    per_side: list[dict[str, Row]] = []
    for est in estimates:
        rows = {r.id: r for r in ledger_rows(est)} if est is not None else {}
        per_side.append(rows)
        for rid, row in rows.items():
            if rid not in first:
                first[rid] = row
                order.append(rid)
    return tuple(
        RowDiff(
            rid,
            first[rid].label,
            first[rid].location,
            tuple((s[rid].low, s[rid].high) if rid in s else None for s in per_side),
        )
        for rid in order
    )


def _side(name: str, plan: Plan, with_counts: bool, search_budget_s: float | None) -> Side:
    a = analysis(plan, search_budget_s)
    try:
        est = a.estimate
    except PlanError as exc:
        return Side(name, plan, a.config_hash, error=str(exc), counts_error=str(exc))
    if not with_counts:
        return Side(name, plan, a.config_hash, est, counts_error="not searched")
    try:
        return Side(name, plan, a.config_hash, est, counts=a.counts)
    except PlanError as exc:
        return Side(name, plan, a.config_hash, est, counts_error=str(exc))


def compare(
    named: Sequence[tuple[str, Plan]],
    with_counts: bool = True,
    progress: Progress | None = None,
    search_budget_s: float | None = SEARCH_BUDGET_S,
) -> Comparison:
    """Compare two or more (name, plan) pairs; the first is the baseline.

    ``with_counts`` adds each plan's three GPU counts (a layout search each: the slow
    part, shared with the window through ``engine.analysis``). ``progress`` is told
    after each plan and may stop early (the plans done so far are compared).
    ``search_budget_s`` bounds each search in wall-clock seconds (None: unbounded).
    """
    if len(named) < 2:
        raise ValueError(f"a comparison needs at least two plans, got {len(named)}")
    sides: list[Side] = []
    cancelled = False
    for name, plan in named:
        sides.append(_side(name, plan, with_counts, search_budget_s))
        if progress is not None and not progress(len(sides), len(named)):
            cancelled = len(sides) < len(named)
            break
    if len(sides) < 2:
        sides += [Side(n, p, p.config_hash(), error="cancelled") for n, p in named[len(sides) :]]
    return Comparison(
        sides=tuple(sides),
        rows=row_differences([s.estimate for s in sides]),
        inputs=input_differences([s.plan for s in sides]),
        cancelled=cancelled,
    )


SUMMARY_FIGURES: tuple[str, ...] = (
    "Verdict",
    "Peak HBM per rank (must fit)",
    "HBM allocated peak",
    "Limit",
    "Usable capacity",
    "Ranks (layout)",
    "Arithmetic minimum",
    "Procure (first legal layout)",
    "Validation range",
    "Host RAM per node",
    "NVMe per node",
    "Config hash",
)
"""The side-by-side figures every front end prints, in this order."""


def summary(side: Side, units: UnitChoice = "both") -> dict[str, str]:
    """One plan's figures of :data:`SUMMARY_FIGURES` as text (the terminal, the window
    and the report print the same words)."""
    out = dict.fromkeys(SUMMARY_FIGURES, "—")
    out["Config hash"] = side.config_hash[:12]
    est = side.estimate
    if est is None:
        out["Verdict"] = f"cannot be computed: {side.error}"
        return out
    par = side.plan.parallelism
    h = est.heaviest
    out["Verdict"] = VERDICT_WORDS[est.verdict]
    out["Peak HBM per rank (must fit)"] = fmt_range(est.fit_peak.low, est.fit_peak.high, units)
    out["HBM allocated peak"] = fmt_range(h.peak.low, h.peak.high, units)
    out["Limit"] = fmt_bytes(est.limit_bytes, units)
    out["Usable capacity"] = fmt_bytes(est.capacity_bytes, units)
    out["Ranks (layout)"] = (
        f"{est.world_size:,} (TP{par.tp} PP{par.pp} CP{par.cp} EP{par.ep} DP{par.dp})"
    )
    out["Host RAM per node"] = fmt_range(*est.nodes.host_peak, units)
    out["NVMe per node"] = fmt_range(*est.nodes.nvme_peak, units)
    k = side.counts
    if k is None:
        for key in SUMMARY_FIGURES[6:9]:
            out[key] = f"({side.counts_error})" if side.counts_error else "—"
        return out

    def gpus(n: int | None) -> str:
        return "none fits" if n is None else f"{n:,}"

    out["Arithmetic minimum"] = gpus(k.arithmetic_min.gpus)
    out["Procure (first legal layout)"] = k.shape if k.nodes else gpus(None)
    out["Validation range"] = validation_range(k)
    return out


def show_input(value: Any) -> str:
    """An input value as the comparison prints it (JSON, or "absent")."""
    if value is ABSENT:
        return "absent"
    return value if isinstance(value, str) else json.dumps(value)


def signed_size(n: int, units: UnitChoice = "gb") -> str:
    """A delta as a signed size (``+1.25 GB``, ``−0.50 GB``, ``±0`` when equal)."""
    if n == 0:
        return "±0"
    return ("+" if n > 0 else "−") + fmt_bytes(abs(n), units)


def delta_text(diff: RowDiff, side: int, units: UnitChoice = "gb") -> str:
    """Δ low / Δ high of one side against the baseline, as sizes (equal: one figure)."""
    lo, hi = diff.delta(side)
    if lo == hi:
        return signed_size(lo, units)
    return f"{signed_size(lo, units)} / {signed_size(hi, units)}"
