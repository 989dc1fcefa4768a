"""Spike of issue 34 — run by hand, prints figures (not a test; pytest collects nothing).

    PYTHONPATH=. python tests/bench_sizing_spike.py [--layouts N (0: timings only)] [--seed S]
                                                    [--no-search] [--rows]

The numbers-only sizing kernel (``tests/spike_sizing``) for Llama-3.1-405B on the default
plan's FSDP2 stack: compared with ``estimate()`` on N random legal layouts (default
10,000), then timed as a table — every candidate of one world size, every candidate of
every world size to 16,384 — beside ``estimate()`` per layout and today's three-count
search, cold and warm. Shape parts are built both ways: from the reference estimate's
rows (the first pass, ``shape.py``) and from its numbers alone (``numbers.py``; the
comparison uses these unless ``--rows``). Write-up: ``docs/sizing-spike.md``.
"""

from __future__ import annotations

import argparse
import statistics
import time

from engine.layout.counts import collector_paused, gpu_counts
from engine.plan import Plan
from engine.presets import plan_for_model_preset
from engine.stacks.defaults import resolved
from tests.bench_engine import clear_caches
from tests.spike_sizing.compare import METRICS, compare
from tests.spike_sizing.draw import MAX_WORLD, draw_layouts, variants
from tests.spike_sizing.numbers import Caches, Clock
from tests.spike_sizing.search import first_practical
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


def _clock_line(c: Clock) -> str:
    per = sorted(c.per_shape_s)
    med = statistics.median(per) if per else 0.0
    return (
        f"  numbers-only shape parts, {c.shapes} shapes: median {med * 1e3:.2f} ms, "
        f"max {per[-1] * 1e3 if per else 0.0:.2f} ms | reference estimate "
        f"{c.estimate_s * 1e3:.1f} ms, masks {c.masks_s * 1e3:.1f} ms, classes "
        f"{c.classes_s * 1e3:.1f} ms, fold {c.fold_s * 1e3:.1f} ms"
    )


def _exactness(plan: Plan, n: int, seed: int, rows: bool) -> None:
    t = time.perf_counter()
    drawn = draw_layouts(plan, n, seed)
    print(f"drew {len(drawn):,} legal layouts in {time.perf_counter() - t:.1f} s")
    rep = compare(variants(plan), drawn, None if rows else Caches())
    how = "rows" if rows else "numbers only"
    print(f"\n== exactness: {rep.layouts:,} layouts, {rep.shapes:,} shapes ({how}) ==")
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
    ap.add_argument("--rows", action="store_true", help="compare with the rows' shape parts")
    ap.add_argument("--searches-only", action="store_true", help="skip the tables' timings")
    args = ap.parse_args()
    plan = plan_for_model_preset(PRESET)
    print(f"{PRESET}: stack {resolved(plan).parallelism.strategy}, default plan")

    if args.layouts > 0:
        _exactness(plan, args.layouts, args.seed, args.rows)
    if not args.searches_only:
        print("\n== tables (caches cleared before each; collector paused, as in gpu_counts) ==")
        with collector_paused():
            _tables(plan)
    if not args.no_search:
        _searches(plan)


def _tables(plan: Plan) -> None:
    """One world and every world, shape parts from rows (the first pass), then from
    numbers only, cold, then again with the kernel's own caches kept."""
    for world, label in ((1024, "one world (1,024 GPUs)"), (MAX_WORLD, "every world")):

        def run(caches: Caches | None, w: int = world) -> Timed:
            return one_world(plan, w, caches) if w == 1024 else every_world(plan, w, caches)

        clear_caches()
        print(_timed_line(f"{label}, rows", run(None)))
        clear_caches()
        caches = Caches()
        print(_timed_line(f"{label}, numbers", run(caches)))
        print(_clock_line(caches.clock))
        clear_caches()  # the engine's caches cold, the kernel's classes and masks kept
        caches.clock = Clock()
        print(_timed_line(f"{label}, numbers, kept", run(caches)))
        print(_clock_line(caches.clock))


def _searches(plan: Plan) -> None:
    """Count 2 as a table search (``tests/spike_sizing/search.py``) and today's three
    counts, each cold (caches cleared) then warm, with the collector paused as
    ``gpu_counts`` pauses it."""
    print("\n== searches (one process, alternated) ==")
    for _ in range(2):
        caches = Caches()
        clear_caches()
        for how in ("cold", "warm"):
            with collector_paused():
                t, cpu = time.perf_counter(), time.process_time()
                f = first_practical(plan, MAX_WORLD, caches)
                s, cpu = time.perf_counter() - t, time.process_time() - cpu
            print(
                f"table search, count 2, {how}: {s * 1e3:7.1f} ms ({cpu * 1e3:.1f} ms CPU) = "
                f"lattice+floors "
                f"{f.lattice_s * 1e3:.1f} + shape parts {f.parts_s * 1e3:.1f} + tables "
                f"{f.tables_s * 1e3:.1f}; {f.gpus} GPUs (world {f.world}); {f.evaluated} of "
                f"{f.shapes} shapes, {f.layouts:,} layouts; floor violations {f.floor_violations}"
            )
        clear_caches()
        times, cpus = [], []
        for _ in range(3):
            t, cpu = time.perf_counter(), time.process_time()
            c = gpu_counts(plan, max_gpus=MAX_WORLD, budget_s=None)
            times.append(time.perf_counter() - t)
            cpus.append(time.process_time() - cpu)
        print(
            f"gpu_counts(≤{MAX_WORLD:,}): cold {times[0] * 1e3:.1f} ms ({cpus[0] * 1e3:.1f} CPU), "
            f"then warm {times[1] * 1e3:.1f} / {times[2] * 1e3:.1f} ms ({cpus[1] * 1e3:.1f} / "
            f"{cpus[2] * 1e3:.1f} CPU); {c.estimates} estimates; first layout "
            f"{c.first_layout.gpus} GPUs"
        )


if __name__ == "__main__":
    main()
