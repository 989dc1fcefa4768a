"""The cuBLAS(Lt) workspaces' row: allocated bytes, one workspace per (handle, stream)
that runs a GEMM (sizes and counts: :mod:`engine.stacks.blas_workspace`).

Persistent from the first step on: ATen keeps each workspace in
``cublas_handle_stream_to_workspace()`` until ``clearCublasWorkspaces`` (which no
training loop calls), so it is in the steady allocated bytes that the reserve model
reads as the persistent part, and in every moment's allocated sum.
"""

from __future__ import annotations

from functools import partial

from engine.ledger.row import Row, make_row
from engine.sections.runtime import RuntimeSection
from engine.stacks.blas_workspace import TRAINING_HANDLES, workspace_band
from engine.units import fmt_count

WORKSPACE_GROUP = "workspace"


def workspace_row(rt: RuntimeSection, accelerator: str, runtime_group: str) -> Row:
    """The training step's cuBLAS(Lt) workspaces on the compute stream: allocated through
    the caching allocator (state ``workspace``), or, for a torch 2.2-2.3 build on CUDA
    12.2+, cuBLAS's own memory outside PyTorch (state ``runtime``, ``runtime_group``)."""
    band = workspace_band(rt.framework_version, accelerator)
    per = rt.cublas_workspace_bytes
    low, high = (band.low, band.high) if per is None else (per.low, per.high)
    as_set = per is not None and (per.low, per.high) != (band.low, band.high)
    why = "runtime.cublas_workspace_bytes as set" if as_set else band.why
    n = TRAINING_HANDLES
    return make_row(
        id="hbm.runtime.cublas",
        label=f"cuBLAS workspaces ({n} handles on the compute stream)",
        state="workspace" if band.inside else "runtime",
        role="cublas_workspace",
        location="hbm",
        kind="persistent",
        group=WORKSPACE_GROUP if band.inside else runtime_group,
        low=n * low,
        high=n * high,
        formula=partial(_formula, n, low, high, why, band.inside, rt.framework_version),
        source="cublas-workspace",
    )


def _formula(n: int, low: int, high: int, why: str, inside: bool, version: str) -> str:
    where = (
        "allocated through the caching allocator (CublasHandlePool.cpp setWorkspaceForHandle)"
        if inside
        else "outside PyTorch"
    )
    size = fmt_count(low) if low == high else f"{fmt_count(low)}–{fmt_count(high)}"
    return (
        f"{n} × {size} B ({why}; {version}): one per (handle, stream) that runs a GEMM — "
        f"the forward's thread and autograd's device thread, {where}"
    )
