"""How many bytes one rank moves for a collective, and over which link class.

Ring algorithms, per rank (Patarasuk & Yuan 2009; NCCL's own bandwidth accounting,
``nccl-tests`` ``doc/PERFORMANCE.md``): an all-reduce of S bytes over n ranks sends
2(n − 1)/n · S, an all-gather or a reduce-scatter whose full tensor is S sends
(n − 1)/n · S, an all-to-all of an S-byte send buffer sends (n − 1)/n · S, a p2p send S.

A group that spans nodes is split the way a two-level algorithm moves it (NCCL's tree
and hierarchical rings): the k members on one node first work over the node's links,
then the node's share crosses the network, each of the k members carrying 1/k of it on
its own NIC. The bytes that cross are what the inter-node links must carry at least.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from engine.ledger.groups import Group

Collective = Literal["all-reduce", "all-gather", "reduce-scatter", "all-to-all", "p2p"]

RING_FACTOR: dict[Collective, tuple[int, int]] = {
    "all-reduce": (2, 1),
    "all-gather": (1, 1),
    "reduce-scatter": (1, 1),
    "all-to-all": (1, 1),
    "p2p": (1, 0),
}
"""(a, b) in a·(n − b)/n: the share of S one rank sends (p2p: all of it)."""


@dataclass(frozen=True, slots=True)
class LinkBytes:
    """Bytes one rank sends over the node's links and over the network."""

    intra: int
    inter: int


def ring_bytes(collective: Collective, n: int, size: int) -> int:
    """Bytes one rank sends for ``collective`` of ``size`` bytes over ``n`` ranks."""
    if n <= 1:
        return 0
    a, b = RING_FACTOR[collective]
    return a * size * (n - b) // n


def split_by_link(collective: Collective, group: Group, size: int, rpn: int) -> LinkBytes:
    """``ring_bytes`` split into what stays inside the node and what crosses nodes."""
    n = group.size
    if group.inside_node(rpn):
        return LinkBytes(ring_bytes(collective, n, size), 0)
    if collective == "p2p":
        return LinkBytes(0, size)
    k = max(1, min(n, rpn // group.stride))  # members of the group on one node
    nodes = -(-n // k)
    if collective == "all-to-all":
        return LinkBytes(size * (k - 1) // n, size * (n - k) // n)
    return LinkBytes(ring_bytes(collective, k, size), ring_bytes(collective, nodes, size) // k)
