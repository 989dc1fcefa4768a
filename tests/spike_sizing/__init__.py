"""Spike of issue 34: a numbers-only sizing kernel for a dense FSDP2 plan, vectorised
over candidate layouts, compared with ``estimate()`` (``tests/bench_sizing_spike.py``).

Not a product module: nothing in engine/ or gui/ imports it, and pytest collects
nothing here (no ``test_*`` files)."""
