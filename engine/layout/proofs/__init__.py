"""The proofs: every part of the search that reads ledger rows to skip estimates soundly
(``bound``: the rank floor and the peak floor; ``stage_bounds``: the state and low
bounds; ``cross_ep``, ``regimes``, and ``evaluate``: the padding slack, and the floors it
asks before an estimate). Only this package may
import ledger internals (``test_only_the_proofs_read_ledger_internals``); a row added to
the ledger must pass each proof's oracle test, named in its docstring.

This face re-exports the ledger facts the lattice reads, and imports no proof module
(the proofs import the lattice, which imports this face)."""

from engine.ledger.groups import ranks_per_node
from engine.ledger.placement import layer_classes, policy_split
from engine.ledger.sharding import shard_group_size

__all__ = ["layer_classes", "policy_split", "ranks_per_node", "shard_group_size"]
