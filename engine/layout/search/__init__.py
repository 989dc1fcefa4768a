"""The search: the minimum-cost walk over the lattice, the three GPU counts, their
alternatives, closest layout, procurement and levers. It reads no ledger row itself:
it asks :class:`engine.layout.proofs.evaluate.Evaluator` for outcomes and the proofs
for what it may skip."""
