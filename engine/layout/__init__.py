"""Layouts: the TP × PP × CP × EP × DP lattice (judged by engine.legality, ranked by
preferences: ``lattice``), the proofs that read the ledger's rows to skip estimates
(``proofs``, the only part that imports ledger internals) and the minimum-cost search
with the three GPU counts (``search``)."""

from engine.layout.lattice.shapes import Layout, LayoutPreferences, Rejected, enumerate_layouts
from engine.layout.search.counts import Count, GpuCounts, gpu_counts

__all__ = [
    "Count",
    "GpuCounts",
    "Layout",
    "LayoutPreferences",
    "Rejected",
    "enumerate_layouts",
    "gpu_counts",
]
