"""The search: the minimum-cost walk, the three GPU counts and what they show beside
them. It reads no ledger row: it asks :mod:`engine.layout.proofs` what to skip."""
