"""The lattice: every TP × PP × CP × EP × DP layout of a world size, legal or not and
why (engine.legality's rules, the preferences, the batch, FSDP padding), and a shape's
candidate DPs. Nothing here estimates memory or reads a ledger row; the few ledger
facts it needs (ranks per node, shard group sizes, the pipeline split, layer classes)
come through :mod:`engine.layout.proofs`' face."""
