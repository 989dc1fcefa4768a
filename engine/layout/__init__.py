"""Layouts: the TP × PP × CP × EP × DP lattice (judged by engine.legality, ranked by
preferences), the minimum-rank search and the three GPU counts."""

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
