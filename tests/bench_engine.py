"""Benchmark of the engine's hot paths — run by hand, prints medians (not a test).

    PYTHONPATH=. python tests/bench_engine.py [--repeat N] [--rounds R] [--presets a,b,...]
                                              [--budget S] [--no-search]

Prints the figures issue 17 asks for: ``estimate()`` medians for a dense PP1 plan
(Llama-3.1-8B FSDP2, target ≤ 0.1 ms), a PP16 interleaved plan (Llama-3.1-70B
Megatron TP4 PP16 v5, target ≤ 0.5 ms) and DeepSeek-V3 (Megatron, PP16 uneven split,
EP64, full recompute; target ≤ 0.5 ms), each warm (the same plan again, as the window
re-estimates: ``estimate``'s own cache answers), fresh (plans never estimated before,
differing in the micro-batch: what an edit costs; issue 34's target ≤ 50 µs dense),
fresh seq (differing in the sequence length: the stage make-ups are rebuilt too) and
cold (caches cleared); then the
full three-count GPU search to 16,384 GPUs for every model preset (its default plan,
FSDP2 on H100 nodes; the issue-34 targets: ≤ 100 ms median, ≤ 200 ms the slowest),
with the estimates it needed and whether it stopped at its budget (wall and this
process's CPU time: on a shared machine the CPU figure is the steadier), their median
and slowest; last, for the slowest preset, what the cyclic garbage collector costs a search
(``engine/layout/counts.py``: the same cold search with the collector running,
and the first full collection after a paused one); and what ``Layout.at_dp`` saves over
``dataclasses.replace``. The figures the engine's docstrings
once quoted belong here.
"""

from __future__ import annotations

import argparse
import dataclasses
import gc
import itertools
import statistics
import time
from collections.abc import Callable
from functools import _lru_cache_wrapper, partial

from engine.estimate import estimate
from engine.layout.counts import gpu_counts
from engine.layout.point import Layout
from engine.models.presets import preset_names
from engine.plan import Plan, default_plan, with_values
from engine.presets import plan_for_model_preset

PP16_INTERLEAVED = {
    "parallelism.strategy": "megatron_distopt",
    "parallelism.tp": 4,
    "parallelism.pp": 16,
    "parallelism.dp": 2,
    "parallelism.pp_schedule": "interleaved_1f1b",
    "parallelism.virtual_stages": 5,
    "batch.grad_accum": 16,
}
DEEPSEEK = {
    "parallelism.strategy": "megatron_distopt",
    "parallelism.pp": 16,
    "parallelism.ep": 64,
    "parallelism.dp": 64,
    "method.recompute.policy": "full",
    "batch.grad_accum": 16,
    "parallelism.pp_layer_split": [3, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 2],
}


def median_s(fn: Callable[[], object], repeat: int) -> float:
    fn()  # warm
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


_UNSEEN = itertools.count(1)
"""Micro-batch sizes never estimated before in this run (every round takes new ones)."""


_UNSEEN_SEQ = itertools.count(4097)
"""Sequence lengths never estimated before in this run."""


def fresh_s(plan: Plan, repeat: int, field: str = "batch.micro_batch") -> float:
    """Median of estimates of plans not estimated before (micro-batch sizes, or with
    ``field`` ``batch.seq_len`` sequence lengths, this run has not used — each an unseen
    plan, so no cache keyed on the whole plan can answer; a new sequence length also
    rebuilds the stage make-ups, which a new micro-batch size reuses)."""
    unseen = _UNSEEN if field == "batch.micro_batch" else _UNSEEN_SEQ
    plans = [with_values(plan, {field: next(unseen)}) for _ in range(repeat)]
    times = []
    for p in plans:
        t = time.perf_counter()
        estimate(p)
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def rounds_ms(fn: Callable[[], float], rounds: int) -> str:
    """``best / median`` of ``rounds`` medians, in ms."""
    got = [fn() * 1e3 for _ in range(rounds)]
    return f"{min(got):7.3f} / {statistics.median(got):7.3f}"


def clear_caches() -> None:
    """Empty every functools cache in the engine (a cold estimate). Thaws first: a search
    ends by freezing what is alive (``engine/layout/counts.py``), and
    ``gc.get_objects`` does not list frozen objects, so the caches would be missed."""
    gc.unfreeze()
    for obj in gc.get_objects():
        if isinstance(obj, _lru_cache_wrapper) and obj.__module__.startswith("engine"):
            obj.cache_clear()


def cold_s(plan: Plan) -> float:
    clear_caches()
    t = time.perf_counter()
    estimate(plan)
    return time.perf_counter() - t


def layout_copy_figures(repeat: int) -> None:
    """What ``Layout.at_dp`` (``engine/layout/point.py``) saves over ``dataclasses.replace``
    per layout the search builds (one per candidate DP of every shape)."""
    lay = Layout(tp=8, pp=4, cp=1, ep=1, dp=1, micro_batch=1, grad_accum=8, pp_split=(32,) * 4)
    n = 10_000

    def built() -> None:
        for d in range(n):
            lay.at_dp(d, 1, 8)

    def replaced() -> None:
        for d in range(n):
            dataclasses.replace(lay, dp=d, micro_batch=1, grad_accum=8)

    at_dp, rep = median_s(built, repeat) / n, median_s(replaced, repeat) / n
    print(
        f"Layout.at_dp {at_dp * 1e9:.0f} ns, dataclasses.replace {rep * 1e9:.0f} ns "
        f"({rep / at_dp:.1f}× at_dp) per layout"
    )


def collector_figures(name: str, budget: float) -> None:
    """One cold search of ``name`` with the collector paused (as ``gpu_counts`` runs), one
    with it running, and the first full collection after a paused search."""
    plan = plan_for_model_preset(name)
    unpaused = getattr(gpu_counts, "__wrapped__", gpu_counts)  # the search, no pause
    took = {}
    for label, search in (("paused", gpu_counts), ("running", unpaused)):
        gc.unfreeze()
        clear_caches()
        gc.collect()
        t = time.perf_counter()
        search(plan, max_gpus=16384, budget_s=budget)
        took[label] = time.perf_counter() - t
    gc.unfreeze()
    clear_caches()
    gc.collect()
    gc.disable()  # a pause begun with the collector off ends freezing nothing
    gpu_counts(plan, max_gpus=16384, budget_s=budget)
    t = time.perf_counter()
    gc.collect()
    after = time.perf_counter() - t
    gc.enable()
    print(
        f"collector on {name}: cold search {took['paused'] * 1e3:.1f} ms paused, "
        f"{took['running'] * 1e3:.1f} ms running; first full collection after an "
        f"unfrozen paused search {after * 1e3:.1f} ms"
    )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--presets", default="", help="comma-separated (default: every preset)")
    ap.add_argument("--budget", type=float, default=20.0, help="search budget per preset, s")
    ap.add_argument("--rounds", type=int, default=5, help="rounds of --repeat calls each")
    ap.add_argument("--no-search", action="store_true", help="estimate() figures only")
    args = ap.parse_args()
    plans = (
        ("dense PP1 (llama-3.1-8b fsdp2)", default_plan()),
        (
            "PP16 interleaved (70b tp4 v5)",
            with_values(plan_for_model_preset("llama-3.1-70b"), PP16_INTERLEAVED),
        ),
        (
            "deepseek-v3 (pp16 uneven, ep64)",
            with_values(plan_for_model_preset("deepseek-v3"), DEEPSEEK),
        ),
    )
    print(f"estimate() medians in ms, best / median of {args.rounds} rounds:")
    for name, plan in plans:
        warm = rounds_ms(lambda p=plan: median_s(lambda: estimate(p), args.repeat), args.rounds)
        fresh = rounds_ms(lambda p=plan: fresh_s(p, args.repeat), args.rounds)
        seq = rounds_ms(partial(fresh_s, plan, args.repeat, "batch.seq_len"), args.rounds)
        cold = cold_s(plan)
        print(
            f"  {name:<34} warm {warm}   fresh {fresh}   fresh seq {seq}   cold {cold * 1e3:7.1f}"
        )
    layout_copy_figures(min(args.repeat, 5))
    if args.no_search:
        return
    names = [n for n in args.presets.split(",") if n] or preset_names()
    times: dict[str, float] = {}
    cpu: dict[str, float] = {}
    for name in names:
        plan = plan_for_model_preset(name)
        t, c0 = time.perf_counter(), time.process_time()
        c = gpu_counts(plan, max_gpus=16384, budget_s=args.budget)
        cpu[name] = time.process_time() - c0
        t = times[name] = time.perf_counter() - t
        stop = "  STOPPED AT BUDGET" if c.stopped else ""
        print(
            f"gpu_counts(≤16384) {name:<24} {t * 1e3:9.1f} ms ({cpu[name] * 1e3:7.1f} ms CPU)  "
            f"{c.estimates:6d} estimates  procure {c.first_layout.gpus}{stop}"
        )
    slowest = max(times, key=times.__getitem__)
    print(
        f"full searches: median {statistics.median(times.values()) * 1e3:.1f} ms "
        f"({statistics.median(cpu.values()) * 1e3:.1f} ms CPU), slowest "
        f"{times[slowest] * 1e3:.1f} ms ({slowest}; {max(cpu.values()) * 1e3:.1f} ms the "
        f"most CPU), over {len(times)} presets"
    )
    collector_figures(slowest, args.budget)


if __name__ == "__main__":
    main()
