"""The proofs: every part of the layout search that reads the ledger, row by row or
through its builders, to skip estimates soundly — the rank floor (``floor``), the peak
floor (``bound``), the state and low bounds (``state_bound``, ``low_bound``), the
cross-EP rule (``cross_ep``), the padding slack (``slack``), the DP regimes
(``regimes``, ``known``) and the evaluator that asks them before it estimates
(``evaluate``). Only this package may import the ledger's internals
(``tests/test_architecture.py``, ``test_only_the_proofs_read_ledger_internals``).

This face re-exports the few ledger facts the lattice reads — ranks per node, a
parallel group's shard size, the pipeline's layer split and layer classes — so the
lattice and the search never name a ledger module. It imports no proof module (the
proofs import the lattice, which imports this face)."""

from engine.ledger.groups import ranks_per_node
from engine.ledger.placement import layer_classes, policy_split
from engine.ledger.sharding import shard_group_size

__all__ = ["layer_classes", "policy_split", "ranks_per_node", "shard_group_size"]
