"""Layouts: the TP × PP × CP × EP × DP lattice (judged by engine.legality, ranked by
preferences), the minimum-rank search and the three GPU counts."""

from engine.layout.counts import Count, GpuCounts, gpu_counts
from engine.layout.lattice import Layout, LayoutPreferences, Rejected, enumerate_layouts

__all__ = [
    "Count",
    "GpuCounts",
    "Layout",
    "LayoutPreferences",
    "Rejected",
    "enumerate_layouts",
    "gpu_counts",
]
