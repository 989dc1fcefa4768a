"""Spike of issue 34 — run by hand, prints figures (not a test; pytest collects nothing).

    PYTHONPATH=. python tests/bench_sizing_spike.py [--layouts N (0: timings only)] [--seed S]
                                                    [--no-search]

The numbers-only sizing kernel (``tests/spike_sizing``) for Llama-3.1-405B on the default
plan's FSDP2 stack: compared with ``estimate()`` on N random legal layouts (default
10,000), then timed as a table — every candidate of one world size, every candidate of
every world size to 16,384 — beside ``estimate()`` per layout and one cold run of
today's three-count search. Write-up: ``docs/sizing-spike.md``.
"""

from __future__ import annotations

import argparse
import statistics
import time

from engine.layout.counts import gpu_counts
from engine.plan import Plan
from engine.presets import plan_for_model_preset
from engine.stacks.defaults import resolved
from tests.bench_engine import clear_caches
from tests.spike_sizing.compare import METRICS, compare
from tests.spike_sizing.draw import MAX_WORLD, draw_layouts, variants
from tests.spike_sizing.timing import Timed, every_world, one_world

PRESET = "llama-3.1-405b"


def _timed_line(what: str, t: Timed) -> str:
    per = (t.shapes_s + t.table_s) / max(t.layouts, 1)
    return (
        f"{what:<28} {t.layouts:7,d} layouts {t.shapes:5d} shapes | legality "
        f"{t.legality_s * 1e3:8.1f} ms | shape parts {t.shapes_s * 1e3:8.1f} ms | table "
        f"{t.table_s * 1e3:7.2f} ms ({t.table_s / max(t.layouts, 1) * 1e6:6.2f} µs/layout) "
        f"| kernel {per * 1e6:7.1f} µs/layout"
    )


def _exactness(plan: Plan, n: int, seed: int) -> None:
    t = time.perf_counter()
    drawn = draw_layouts(plan, n, seed)
    print(f"drew {len(drawn):,} legal layouts in {time.perf_counter() - t:.1f} s")
    rep = compare(variants(plan), drawn)
    print(f"\n== exactness: {rep.layouts:,} layouts, {rep.shapes:,} shapes ==")
    for m in METRICS:
        print(f"  {m:<9} exact {rep.exact[m]:6,d} / {rep.layouts:,}")
    for m in sorted(rep.max_abs):
        print(f"  {m:<11} max |Δ| {rep.max_abs[m]:15,d} B   max rel {rep.max_rel[m]:.3e}")
    print(f"  shard group 1 (DP×CP = 1): {rep.unsharded:,} layouts, {rep.unsharded_exact} exact")
    print(
        f"  at the shape's reference DP (exact by construction): {rep.at_reference:,} layouts, "
        f"{rep.at_reference_exact:,} exact; elsewhere: "
        f"{rep.layouts - rep.at_reference:,} layouts, "
        f"{rep.exact['moments'] - rep.at_reference_exact:,} exact in every moment"
    )
    print("  rows not reproduced (layouts):")
    for row, count in rep.missed_rows.most_common():
        print(f"    {row:<40} {count:6,d}")
    med = statistics.median(rep.estimate_s)
    mean = statistics.fmean(rep.estimate_s)
    print(f"\n== timing (2 shared cores) ==\nestimate() per layout: median {med * 1e6:.0f} µs")
    print(f"  mean {mean * 1e6:.0f} µs (each plan new to estimate()'s own cache)")
    print(
        f"compare pass: shape parts median {statistics.median(rep.shape_s) * 1e3:.2f} ms "
        f"per shape; tables {rep.table_s * 1e3:.1f} ms for {rep.layouts:,} layouts"
    )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--layouts", type=int, default=10_000)
    ap.add_argument("--seed", type=int, default=34)
    ap.add_argument("--no-search", action="store_true")
    args = ap.parse_args()
    plan = plan_for_model_preset(PRESET)
    print(f"{PRESET}: stack {resolved(plan).parallelism.strategy}, default plan")

    if args.layouts > 0:
        _exactness(plan, args.layouts, args.seed)
    clear_caches()
    print(_timed_line("one world (1,024 GPUs)", one_world(plan, 1024)))
    clear_caches()
    print(_timed_line(f"every world to {MAX_WORLD:,}", every_world(plan, MAX_WORLD)))
    if not args.no_search:
        clear_caches()
        t = time.perf_counter()
        c = gpu_counts(plan, max_gpus=MAX_WORLD, budget_s=None)
        s = time.perf_counter() - t
        print(
            f"gpu_counts(≤{MAX_WORLD:,}) cold: {s * 1e3:.1f} ms, {c.estimates} estimates; "
            f"first layout {c.first_layout.gpus} GPUs"
        )


if __name__ == "__main__":
    main()
