"""Benchmark of the engine's hot paths — run by hand, prints medians (not a test).

    PYTHONPATH=. python tests/bench_engine.py [--repeat N]

Measures estimate() for one plan, the lattice's legality judgements (every layout of
4,096 GPUs; the strict and relaxed shapes the search starts from), the full three-count
search up to 4,096 GPUs, and the same search for a 405B-class model (126 layers), with
the number of estimates each search needed (the search's cost is estimates × the time
of one estimate).
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

from engine.estimate import estimate
from engine.layout.counts import gpu_counts
from engine.layout.lattice import LayoutPreferences, enumerate_layouts, legal_shapes
from engine.plan import Plan, default_plan, with_values

BIG = {
    "family": "llama",
    "hidden": 16384,
    "layers": 126,
    "heads": 128,
    "kv_heads": 8,
    "intermediate": 53248,
    "vocab": 128256,
    "max_position": 131072,
}


def median_s(fn: Callable[[], object], repeat: int) -> float:
    fn()  # warm
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=5)
    n = ap.parse_args().repeat
    small = default_plan()
    big: Plan = with_values(small, {"model.architecture": BIG})
    for name, plan in (("llama-3.1-8b fsdp2", small), ("405b-class fsdp2", big)):
        t = median_s(lambda p=plan: estimate(p), n * 10)
        print(f"estimate()            {name:<22} median {t * 1e3:8.2f} ms")
    prefs = LayoutPreferences()
    for name, plan in (("llama-3.1-8b fsdp2", small), ("405b-class fsdp2", big)):
        t = median_s(lambda p=plan: enumerate_layouts(p, 4096), n * 4)
        print(f"enumerate_layouts(4096) {name:<21} median {t * 1e3:8.2f} ms")
        t = median_s(
            lambda p=plan: (legal_shapes(p, 4096, prefs), legal_shapes(p, 4096, prefs.relaxed())),
            n * 4,
        )
        print(f"legal_shapes ×2 (4096) {name:<22} median {t * 1e3:8.2f} ms")
    for name, plan in (
        ("llama-3.1-8b fsdp2", small),
        ("405b-class fsdp2", big),
        ("405b-class ddp", with_values(big, {"parallelism.strategy": "ddp"})),
    ):
        calls = gpu_counts(plan, max_gpus=4096).estimates
        t = median_s(lambda p=plan: gpu_counts(p, max_gpus=4096), n)
        print(f"gpu_counts(≤4096 GPUs) {name:<22} median {t * 1e3:8.1f} ms  ({calls} estimates)")


if __name__ == "__main__":
    main()
