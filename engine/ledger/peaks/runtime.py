"""Device memory outside PyTorch's tensors (memory-model §5).

CUDA context, NCCL buffers per communicator and cuBLAS workspaces are not in
``torch.cuda.memory_allocated``; the caching allocator's reserve is the gap between
reserved and allocated. These rows carry group ``runtime`` / ``allocator`` so totals can
be reported both as allocated (tensors only) and as reserved / device; their states
(``runtime``, ``allocator``) keep them out of the allocated timeline.
"""

from __future__ import annotations

from functools import partial

from engine.ledger.groups import stage_groups
from engine.ledger.row import Row, make_row
from engine.plan import Plan
from engine.sections.runtime import RuntimeSection
from engine.stacks.accelerators import nccl_band
from engine.units import fmt_count

RUNTIME_GROUP = "runtime"
ALLOCATOR_GROUP = "allocator"


def communicators(plan: Plan, stage: int) -> list[str]:
    """The NCCL communicators one rank of ``stage`` joins, from its parallel groups
    (:func:`engine.ledger.groups.stage_groups`)."""
    return [g.label for g in stage_groups(plan, stage)]


def runtime_rows(plan: Plan, stage: int) -> list[Row]:
    rt = plan.runtime
    rows = list(_context_rows(rt))
    comms = communicators(plan, stage)
    if comms:
        n = len(comms)
        per = rt.nccl_bytes_per_communicator
        if per is None:  # left to the accelerator generation: resolve the plan first
            raise ValueError("runtime.nccl_bytes_per_communicator left at auto: resolve the plan")
        band = nccl_band(plan.hardware.accelerator)
        why = (
            band.why
            if (per.low, per.high) == (band.low, band.high)
            else "runtime.nccl_bytes_per_communicator as set"
        )
        source = band.source if why == band.why else "nccl-buffers"
        rows.append(
            make_row(
                id="hbm.runtime.nccl",
                label=f"NCCL buffers, {n} communicator(s)",
                state="runtime",
                role="nccl_buffers",
                location="hbm",
                kind="persistent",
                group=RUNTIME_GROUP,
                low=n * per.low,
                high=n * per.high,
                formula=partial(_nccl_formula, n, per.low, per.high, why, tuple(comms)),
                source=source,
            )
        )
    return rows


def _nccl_formula(n: int, low: int, high: int, why: str, comms: tuple[str, ...]) -> str:
    return (
        f"{n} × {fmt_count(low)}–{fmt_count(high)} B ({why}; "
        "multi-node and all-to-all communicators can need more, NVIDIA/nccl #986): "
        + ", ".join(comms)
    )


_CONTEXT: dict[int, tuple[RuntimeSection, tuple[Row, Row]]] = {}
""":func:`_context_rows` by the runtime section's identity (a layout search's plans share
one; the entry holds it, so its id is not reused)."""


def _context_rows(rt: RuntimeSection) -> tuple[Row, Row]:
    """The CUDA context's and cuBLAS workspace's rows, which read only the runtime
    section: made once per section (rows are immutable, so stages share them)."""
    got = _CONTEXT.get(id(rt))
    if got is not None and got[0] is rt:
        return got[1]
    rows = (
        make_row(
            id="hbm.runtime.cuda_context",
            label="CUDA context",
            state="runtime",
            role="cuda_context",
            location="hbm",
            kind="persistent",
            group=RUNTIME_GROUP,
            low=rt.cuda_context_bytes.low,
            high=rt.cuda_context_bytes.high,
            formula="per process, lazy vs eager module loading (runtime.cuda_context_bytes)",
            source="cuda-context",
        ),
        make_row(
            id="hbm.runtime.cublas",
            label="cuBLAS workspace",
            state="runtime",
            role="cublas_workspace",
            location="hbm",
            kind="persistent",
            group=RUNTIME_GROUP,
            low=rt.cublas_workspace_bytes.low,
            high=rt.cublas_workspace_bytes.high,
            formula="one handle on the compute stream (8 MiB; 32 MiB on Hopper)",
            source="cublas-workspace",
        ),
    )
    if len(_CONTEXT) >= 1024:
        _CONTEXT.clear()
    _CONTEXT[id(rt)] = (rt, rows)
    return rows


def reserve_factors(plan: Plan) -> tuple[float, float]:
    """The allocator reserve's share of the allocated peak, (low, high), read once per
    plan: estimate() applies them to every stage's peak (:func:`reserve_bytes`)."""
    band = plan.runtime.allocator_reserve
    return band.low, band.high


def reserve_bytes(factors: tuple[float, float], peak_low: int, peak_high: int) -> tuple[int, int]:
    """The (low, high) bytes of :func:`reserve_row` over this allocated peak, from
    :func:`reserve_factors`: ``int(peak × factor)``, what an estimate's numbers need
    of it (the row is built when a view reads it)."""
    return int(peak_low * factors[0]), int(peak_high * factors[1])


def reserve_row(plan: Plan, peak_low: int, peak_high: int) -> Row:
    """The caching allocator's reserve over the allocated peak (reserved − allocated)."""
    band = plan.runtime.allocator_reserve
    low, high = reserve_bytes((band.low, band.high), peak_low, peak_high)
    seg = (
        " (expandable_segments on: the low end is the likelier)"
        if plan.runtime.expandable_segments
        else ""
    )
    return make_row(
        id="hbm.runtime.allocator_reserve",
        label="Caching allocator reserve (reserved − allocated)",
        state="allocator",
        location="hbm",
        kind="peak",
        group=ALLOCATOR_GROUP,
        low=low,
        high=high,
        formula=lambda: (
            f"allocated peak {fmt_count(peak_low)}–{fmt_count(peak_high)} B × "
            f"{band.low:.2f}–{band.high:.2f} (runtime.allocator_reserve; 0.11 pytorch #40989 to "
            f"0.36 torchtitan #165 by default){seg}"
        ),
        source="cuda-caching-allocator",
    )


def outside_capacity(plan: Plan, row: Row) -> bool:
    """Whether ``row`` is already outside the capacity the verdict compares with: when the
    capacity is what the framework can allocate (``framework_visible``), the CUDA context
    has been taken from it."""
    return plan.hardware.usable_policy == "framework_visible" and row.role == "cuda_context"
