"""The topology of a layout: ranks on nodes, the TP/CP/EP/DP/PP groups, and which
links (NVLink inside a node, the network across nodes) carry what.

Ranks are numbered with TP fastest, then CP, EP, DP and PP — Megatron-Core's default
order ``tp-cp-ep-dp-pp`` (``parallel_state.initialize_model_parallel``), which
torchtitan's device mesh (``[pp, dp, cp, tp]``, TP innermost) matches on the dimensions
they share — and placed ``ranks_per_node`` to a node in rank order. A group is all
ranks that differ only in one dimension; it runs on NVLink when all its ranks share a
node. :func:`topology` computes the groups (no Qt); :func:`draw_topology` draws the
diagram onto any painter (the Layouts tab and the report's vector recording).
"""

from __future__ import annotations

from dataclasses import dataclass
from math import gcd

from PySide6.QtCore import QPointF, QRectF, Qt
from PySide6.QtGui import QColor, QPainter, QPen

from engine.layout.shapes import Layout
from gui.views.paint_axes import set_pixel_font, text_in

DIMS: tuple[str, ...] = ("tp", "cp", "ep", "dp", "pp")
"""Rank order, fastest-varying first."""
DIM_COLORS = {"tp": "#D62728", "cp": "#17BECF", "ep": "#9467BD", "dp": "#1F77B4", "pp": "#FF7F0E"}
STAGE_FILLS = ("#E8F0F8", "#FDEBD7", "#E5F3E2", "#F1E6F0", "#FBE3E3", "#E3F2F1", "#F2EFE3")
NODES_DRAWN = 3
"""Nodes drawn in full (the first, the second and the last); the rest repeat them."""

CARRIES: dict[str, str] = {
    "tp": "activations: all-reduce (reduce-scatter + all-gather with sequence parallel) "
    "in every layer, forward and backward",
    "cp": "attention keys and values passed ring-wise between the sequence chunks, every layer",
    "ep": "tokens all-to-all to their experts and back, every MoE layer",
    "pp": "activations forward and their gradients backward, point to point between "
    "adjacent stages, every micro-batch",
}
DP_CARRIES: dict[str, str] = {
    "ddp": "gradient all-reduce once per step",
    "zero1": "gradient all-reduce (reduce-scatter) per step, updated parameters all-gathered",
    "zero2": "gradient reduce-scatter per step, updated parameters all-gathered",
    "sharded": "parameters all-gathered for every unit (forward and backward), gradients "
    "reduce-scattered",
    "hybrid": "parameters all-gathered and gradients reduce-scattered inside the shard group, "
    "gradients all-reduced across replicas",
}
"""What the data-parallel group carries, by strategy family (ZeRO paper §5; FSDP docs)."""


def dp_family(strategy: str) -> str:
    if strategy in ("ddp", "fsdp1_no_shard"):
        return "ddp"
    if strategy in ("zero1", "megatron_distopt"):
        return "zero1"
    if strategy in ("zero2", "fsdp1_shard_grad_op"):
        return "zero2"
    if "hybrid" in strategy or strategy == "fsdp2_hsdp":
        return "hybrid"
    return "sharded"


@dataclass(frozen=True, slots=True)
class GroupKind:
    """All groups of one dimension: how many, how large, where they run, what they carry."""

    dim: str
    size: int
    count: int
    crossing: int  # groups whose ranks span more than one node
    carries: str

    @property
    def link(self) -> str:
        if self.crossing == 0:
            return "NVLink (inside a node)"
        if self.crossing == self.count:
            return "network (across nodes)"
        return f"network for {self.crossing} of {self.count} groups, NVLink for the rest"


@dataclass(frozen=True, slots=True)
class Topology:
    layout: Layout
    ranks_per_node: int
    groups: tuple[GroupKind, ...]  # dimensions of size > 1, in rank order

    @property
    def nodes(self) -> int:
        return -(-self.layout.world_size // self.ranks_per_node)

    def sizes(self) -> dict[str, int]:
        lay = self.layout
        return {"tp": lay.tp, "cp": lay.cp, "ep": lay.ep, "dp": lay.dp, "pp": lay.pp}

    def coords(self, rank: int) -> dict[str, int]:
        """The rank's index in every dimension."""
        out, rest = {}, rank
        for dim, n in self.sizes().items():
            out[dim] = rest % n
            rest //= n
        return out

    def stride(self, dim: str) -> int:
        s = 1
        for d, n in self.sizes().items():
            if d == dim:
                return s
            s *= n
        raise KeyError(dim)


def crossing_groups(world: int, size: int, stride: int, per_node: int) -> int:
    """Groups of ``size`` ranks at ``stride`` whose first and last rank are on different
    nodes (ranks are placed in order, so a group within one node is contiguous in nodes).

    Counted by residue, not rank by rank (a large model's search lays out thousands of
    ranks, and this ran on the GUI thread at every redraw of the Layouts tab): a group
    whose first rank is ``r`` crosses when its span reaches the next node, i.e.
    ``r mod per_node ≥ per_node − span``, and the groups' first ranks repeat their
    residues every ``per_node / gcd(block, per_node)`` blocks."""
    span = (size - 1) * stride  # from a group's first rank to its last
    block = size * stride  # ranks spanned by the groups that share their outer indices
    blocks = -(-world // block)
    if span >= per_node:
        return blocks * stride  # every group reaches another node

    def crossing_below(n: int) -> int:
        """First ranks in [0, n) whose group crosses."""
        return (n // per_node) * span + max(0, n % per_node - (per_node - span))

    def in_block(k: int) -> int:
        return crossing_below(k * block + stride) - crossing_below(k * block)

    period = per_node // gcd(block, per_node)
    whole, rest = divmod(blocks, period)
    return whole * sum(in_block(k) for k in range(period)) + sum(in_block(k) for k in range(rest))


def topology(layout: Layout, ranks_per_node: int, strategy: str) -> Topology:
    """The groups of ``layout`` placed ``ranks_per_node`` ranks to a node."""
    base = Topology(layout, ranks_per_node, ())
    world = layout.world_size
    groups = []
    for dim, size in base.sizes().items():
        if size == 1:
            continue
        stride = base.stride(dim)
        carries = DP_CARRIES[dp_family(strategy)] if dim == "dp" else CARRIES[dim]
        crossing = crossing_groups(world, size, stride, ranks_per_node)
        groups.append(GroupKind(dim, size, world // size, crossing, carries))
    return Topology(layout, ranks_per_node, tuple(groups))


def _short(t: Topology, rank: int) -> str:
    c = t.coords(rank)
    return " ".join(f"{d[0]}{c[d]}" for d in DIMS if t.sizes()[d] > 1) or "—"


def drawn_nodes(t: Topology) -> list[int | None]:
    """Node indices to draw; None is the gap standing for the nodes not drawn."""
    n = t.nodes
    if n <= NODES_DRAWN:
        return list(range(n))
    return [0, 1, None, n - 1]


NODE_GAP, GPU_H, LANE_H, HEAD_H = 10.0, 42.0, 14.0, 15.0


def topology_height(t: Topology) -> float:
    """The height :func:`draw_topology` needs at any width (px)."""
    inside = lanes(t)
    node_h = HEAD_H + GPU_H * _gpu_rows(t) + LANE_H * len(inside) + NODE_GAP
    gaps = sum(1 for n in drawn_nodes(t) if n is None)
    return 26 + node_h * (len(drawn_nodes(t)) - gaps) + 22 * gaps + 8


def _rank_label(painter: QPainter, rank: int, width: float) -> str:
    """``rank N`` where it fits the box at the label's font, else ``N``."""
    set_pixel_font(painter, 9, bold=True)
    text = f"rank {rank}"
    return text if painter.fontMetrics().horizontalAdvance(text) <= width else f"{rank}"


def lanes(t: Topology) -> list[GroupKind]:
    """The groups drawn as lanes inside a node: those with two or more members on one
    node (a group spread one rank per node is drawn only on the network bar)."""
    return [g for g in t.groups if t.stride(g.dim) < t.ranks_per_node]


def _more(n: int) -> str:
    return f"{n:,} more node" + ("" if n == 1 else "s")


def _gpu_rows(t: Topology) -> int:
    return -(-t.ranks_per_node // 8)


def draw_topology(painter: QPainter, rect: QRectF, t: Topology, ink: QColor) -> None:
    """Nodes as frames with their GPUs (rank and coordinates, filled by pipeline stage),
    the groups inside a node as coloured lanes joining their members, and a network bar
    joining the nodes labelled with the groups that cross them."""
    lay = t.layout
    text_in(
        painter,
        QRectF(rect.left(), rect.top(), rect.width(), 18),
        f"{lay.label()} — {lay.world_size:,} ranks on {t.nodes:,} node(s) of "
        f"{t.ranks_per_node} GPUs",
        ink,
        11,
        Qt.AlignmentFlag.AlignLeft,
        bold=True,
    )
    net_w = 170.0 if any(g.crossing for g in t.groups) else 0.0
    left = rect.left() + 54
    width = rect.width() - 54 - net_w - (12 if net_w else 0)
    cols = min(t.ranks_per_node, 8)
    gpu_w = width / cols
    inside = lanes(t)
    y = rect.top() + 26
    anchors: list[float] = []
    for node in drawn_nodes(t):
        if node is None:
            text_in(
                painter,
                QRectF(left, y, width, 18),
                f"⋮  {_more(t.nodes - NODES_DRAWN)} laid out the same way  ⋮",
                ink,
                10,
            )
            y += 22
            continue
        y = _node(painter, t, node, QRectF(left, y, width, 0), gpu_w, cols, inside, ink)
        anchors.append(y - NODE_GAP / 2)
    if net_w:
        _network(
            painter,
            t,
            QRectF(rect.right() - net_w, rect.top() + 26, net_w, 0),
            anchors,
            left + width,
            ink,
        )


def _node(
    painter: QPainter,
    t: Topology,
    node: int,
    area: QRectF,
    gpu_w: float,
    cols: int,
    inside: list[GroupKind],
    ink: QColor,
) -> float:
    y = area.top()
    first = node * t.ranks_per_node
    ranks = [r for r in range(first, first + t.ranks_per_node) if r < t.layout.world_size]
    rows = _gpu_rows(t)
    height = HEAD_H + GPU_H * rows + LANE_H * len(inside)
    frame = QRectF(area.left() - 50, y, area.width() + 52, height)
    painter.setPen(QPen(ink, 0.8))
    painter.setBrush(Qt.BrushStyle.NoBrush)
    painter.drawRoundedRect(frame, 4, 4)
    text_in(
        painter,
        QRectF(frame.left() + 4, y + 1, 120, 13),
        f"node {node}",
        ink,
        9,
        Qt.AlignmentFlag.AlignLeft,
        bold=True,
    )
    text_in(
        painter,
        QRectF(area.left(), y + 1, area.width(), 13),
        "NVLink inside the node",
        ink,
        8,
        Qt.AlignmentFlag.AlignRight,
    )
    centers: dict[int, float] = {}
    for k, r in enumerate(ranks):
        row, col = divmod(k, cols)
        box = QRectF(area.left() + col * gpu_w + 2, y + HEAD_H + row * GPU_H, gpu_w - 4, GPU_H - 4)
        stage = t.coords(r)["pp"]
        painter.setPen(QPen(ink, 0.6))
        painter.setBrush(QColor(STAGE_FILLS[stage % len(STAGE_FILLS)]))
        painter.drawRect(box)
        painter.setBrush(Qt.BrushStyle.NoBrush)
        text_in(
            painter,
            QRectF(box.left(), box.top() + 1, box.width(), 13),
            _rank_label(painter, r, box.width() - 4),
            ink,
            9,
            bold=True,
        )
        text_in(
            painter,
            QRectF(box.left() + 1, box.top() + 14, box.width() - 2, 24),
            _short(t, r),
            ink,
            8,
        )
        centers[r] = box.center().x()
    lane_y = y + HEAD_H + GPU_H * rows
    for g in inside:
        _lane(painter, t, g, ranks, centers, QRectF(area.left(), lane_y, area.width(), LANE_H))
        lane_y += LANE_H
    return y + height + NODE_GAP


def _lane(
    painter: QPainter,
    t: Topology,
    g: GroupKind,
    ranks: list[int],
    centers: dict[int, float],
    lane: QRectF,
) -> None:
    """Each group of ``g`` with two or more ranks in this node: a line through them."""
    color = QColor(DIM_COLORS[g.dim])
    text_in(
        painter,
        QRectF(lane.left() - 48, lane.top(), 44, lane.height()),
        f"{g.dim.upper()} {g.size}",
        color,
        9,
        Qt.AlignmentFlag.AlignRight,
        bold=True,
    )
    stride = t.stride(g.dim)
    members: dict[int, list[int]] = {}
    for r in ranks:
        key = r - t.coords(r)[g.dim] * stride  # the group's first rank
        members.setdefault(key, []).append(r)
    groups = [m for m in members.values() if len(m) > 1]
    for k, m in enumerate(groups):
        dy = lane.top() + 4 + (k % 4) * 2.2
        xs = [centers[r] for r in m]
        painter.setPen(QPen(color, 1.4))
        painter.drawLine(QPointF(min(xs), dy), QPointF(max(xs), dy))
        painter.setBrush(color)
        for x in xs:
            painter.drawEllipse(QPointF(x, dy), 2.0, 2.0)
        painter.setBrush(Qt.BrushStyle.NoBrush)


def _network(
    painter: QPainter, t: Topology, area: QRectF, anchors: list[float], from_x: float, ink: QColor
) -> None:
    """The network column: a bar joining every node, and the groups that cross it."""
    x = area.left() + 6
    top, bottom = (anchors[0], anchors[-1]) if anchors else (area.top(), area.top())
    painter.setPen(QPen(ink, 2.2))
    painter.drawLine(
        QPointF(x, min(top, area.top() + 20)), QPointF(x, max(bottom, area.top() + 20))
    )
    painter.setPen(QPen(ink, 0.8, Qt.PenStyle.DashLine))
    for a in anchors:
        painter.drawLine(QPointF(from_x + 2, a - 20), QPointF(x, a - 20))
    text_in(
        painter,
        QRectF(x + 6, area.top(), area.width() - 12, 14),
        "network across nodes",
        ink,
        9,
        Qt.AlignmentFlag.AlignLeft,
        bold=True,
    )
    y = area.top() + 16
    for g in (g for g in t.groups if g.crossing):
        text_in(
            painter,
            QRectF(x + 6, y, area.width() - 12, 28),
            f"{g.dim.upper()} {g.size}: {g.crossing:,} of {g.count:,} groups",
            QColor(DIM_COLORS[g.dim]),
            9,
            Qt.AlignmentFlag.AlignLeft,
            bold=True,
        )
        y += 16
