"""The lattice: every layout of a world size, legal or not and why, and a shape's
candidate DPs. It estimates nothing and reads no ledger row; its few ledger facts come
through :mod:`engine.layout.proofs`' face."""
