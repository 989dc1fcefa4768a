"""Topology of a layout: rank coordinates (TP fastest, then CP, EP, DP, PP) and which
groups stay inside a node; the diagram draws at the height it asks for."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from PySide6.QtCore import QRectF
from PySide6.QtGui import QColor, QImage, QPainter

from engine.layout.shapes import Layout
from gui.views.topology import (
    DP_CARRIES,
    crossing_groups,
    dp_family,
    drawn_nodes,
    topology,
    topology_height,
)


def test_rank_order_is_tp_fastest_then_cp_ep_dp_pp() -> None:
    """TP2 CP2 DP2 PP2 = 16 ranks: rank 13 = 1 + 2·(0 + 2·(1 + 2·1)) → tp 1, cp 0, dp 1,
    pp 1 (13 = 1 + 2·0 + 4·1 + 8·1)."""
    t = topology(Layout(2, 2, 2, 1, 2), 8, "fsdp2")
    assert t.coords(13) == {"tp": 1, "cp": 0, "ep": 0, "dp": 1, "pp": 1}
    assert [t.stride(d) for d in ("tp", "cp", "ep", "dp", "pp")] == [1, 2, 4, 4, 8]


def test_groups_inside_and_across_nodes() -> None:
    """TP2 PP2 DP2 with 4 ranks per node (8 ranks, 2 nodes): TP pairs {0,1} {2,3} {4,5}
    {6,7} and DP pairs {0,2} {1,3} {4,6} {5,7} stay in a node; PP pairs {0,4} {1,5} {2,6}
    {3,7} all cross — the stage boundary is the node boundary."""
    t = topology(Layout(2, 2, 1, 1, 2), 4, "zero3")
    got = {g.dim: (g.size, g.count, g.crossing) for g in t.groups}
    assert got == {"tp": (2, 4, 0), "dp": (2, 4, 0), "pp": (2, 4, 4)}
    assert t.nodes == 2
    links = {g.dim: g.link for g in t.groups}
    assert links["tp"].startswith("NVLink") and links["pp"].startswith("network")


def test_a_70b_layout_on_eight_gpu_nodes() -> None:
    """TP8 PP4 DP2 on 8 per node: each TP group is one node (8 groups, none crossing);
    DP pairs are 8 ranks apart (32 groups, all crossing); PP quadruples 16 apart (16
    groups, all crossing); 64 ranks on 8 nodes, drawn as nodes 0, 1, …, 7."""
    t = topology(Layout(8, 4, 1, 1, 2), 8, "megatron_distopt")
    got = {g.dim: (g.size, g.count, g.crossing) for g in t.groups}
    assert got == {"tp": (8, 8, 0), "dp": (2, 32, 32), "pp": (4, 16, 16)}
    assert drawn_nodes(t) == [0, 1, None, 7]
    assert next(g for g in t.groups if g.dim == "dp").carries == DP_CARRIES["zero1"]


def test_partly_crossing_groups_are_counted() -> None:
    """DP 3 on 4 ranks per node (TP1): ranks 0-2 share node 0; a single group, inside.
    DP 6 on 4 per node: ranks 0-5 span two nodes → the one group crosses."""
    assert topology(Layout(1, 1, 1, 1, 3), 4, "ddp").groups[0].crossing == 0
    assert topology(Layout(1, 1, 1, 1, 6), 4, "ddp").groups[0].crossing == 1


def test_strategy_families() -> None:
    assert dp_family("ddp") == "ddp" and dp_family("fsdp1_no_shard") == "ddp"
    assert dp_family("zero2") == "zero2" and dp_family("fsdp2_hsdp") == "hybrid"
    assert dp_family("fsdp2") == "sharded" and dp_family("zero3") == "sharded"


def test_diagram_draws_within_its_height(qapp: Any) -> None:
    from gui.views.topology import draw_topology

    t = topology(Layout(8, 4, 1, 1, 2), 8, "fsdp2")
    h = int(topology_height(t))
    img = QImage(640, h, QImage.Format.Format_ARGB32)
    img.fill(QColor("white"))
    painter = QPainter(img)
    draw_topology(painter, QRectF(0, 0, 640, h), t, QColor("black"))
    painter.end()
    dark = sum(
        1
        for y in range(0, h, 3)
        for x in range(0, 640, 3)
        if img.pixelColor(x, y).lightness() < 128
    )
    assert dark > 200  # frames, GPUs and labels were drawn
    bottom = [img.pixelColor(x, h - 2).lightness() for x in range(0, 640, 2)]
    assert min(bottom) > 200  # nothing spills below the height it asked for


def _crossing_rank_by_rank(world: int, size: int, stride: int, per_node: int) -> int:
    """The definition, group by group: first rank ``first``, last ``first + (size-1)·stride``."""
    block = size * stride
    return sum(
        first // per_node != (first + (size - 1) * stride) // per_node
        for start in range(0, world, block)
        for first in range(start, start + stride)
    )


@settings(max_examples=300, deadline=None)
@given(
    st.integers(1, 16),
    st.integers(1, 64),
    st.integers(1, 24),
    st.integers(1, 40),
)
def test_crossing_counted_by_residue_matches_rank_by_rank(
    size: int, stride: int, per_node: int, blocks: int
) -> None:
    """Layouts' groups tile the ranks (world = blocks × size × stride): the residue count
    equals the rank-by-rank definition for any node size, even one the groups straddle."""
    world = blocks * size * stride
    assert crossing_groups(world, size, stride, per_node) == _crossing_rank_by_rank(
        world, size, stride, per_node
    )
