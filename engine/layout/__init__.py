"""Layouts: the TP × PP × CP × EP × DP lattice (judged by engine.legality, ranked by
preferences: ``point``, ``shapes``, ``candidates``), the proofs that read the ledger's
rows to skip estimates (``proofs``, the only part that imports ledger internals) and the
minimum-cost search with the three GPU counts (``minimum``, ``counts``, ``beside``,
``levers``)."""

from engine.layout.beside import Count
from engine.layout.counts import GpuCounts, gpu_counts
from engine.layout.shapes import Layout, LayoutPreferences, Rejected, enumerate_layouts

__all__ = [
    "Count",
    "GpuCounts",
    "Layout",
    "LayoutPreferences",
    "Rejected",
    "enumerate_layouts",
    "gpu_counts",
]
