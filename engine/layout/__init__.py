"""Layouts: the TP × PP × CP × EP × DP lattice, its legality, and the three GPU counts."""

from engine.layout.counts import Count, GpuCounts, gpu_counts
from engine.layout.lattice import Layout, LayoutRules, Rejected, enumerate_layouts

__all__ = [
    "Count",
    "GpuCounts",
    "Layout",
    "LayoutRules",
    "Rejected",
    "enumerate_layouts",
    "gpu_counts",
]
