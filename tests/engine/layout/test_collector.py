"""The search's collector pause: counted, restoring only what it changed, freezing what
it leaves alive and thawing it now and then."""

from __future__ import annotations

import gc
import threading

from engine.estimate import Estimate, estimate
from engine.layout.counts import THAW_EVERY, collector_paused, gpu_counts
from engine.layout.proofs.evaluate import Estimator
from engine.plan import Plan, default_plan
from engine.presets import plan_for_model_preset


def test_pause_nests_and_restores() -> None:
    assert gc.isenabled()
    with collector_paused():
        assert not gc.isenabled()
        with collector_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()  # the outer pause still holds
    assert gc.isenabled()


def test_pause_leaves_a_disabled_collector_disabled() -> None:
    gc.disable()
    try:
        with collector_paused():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_pause_restores_after_an_error() -> None:
    try:
        with collector_paused():
            raise ValueError("boom")
    except ValueError:
        pass
    assert gc.isenabled()


def test_overlapping_threads_restore_once_the_last_ends() -> None:
    inside, release = threading.Event(), threading.Event()

    def hold() -> None:
        with collector_paused():
            inside.set()
            release.wait(10)

    t = threading.Thread(target=hold)
    t.start()
    inside.wait(10)
    with collector_paused():
        pass
    assert not gc.isenabled()  # the other thread's pause is still on
    release.set()
    t.join(10)
    assert gc.isenabled()


def test_gpu_counts_runs_paused_and_restores() -> None:
    seen: list[bool] = []
    gpu_counts(default_plan(), estimator=_spy(seen), alternatives=False)
    assert seen and not any(seen)
    assert gc.isenabled()


def _spy(seen: list[bool]) -> Estimator:
    """An estimator that records whether the collector ran while it was asked."""

    def est(plan: Plan) -> Estimate:
        seen.append(gc.isenabled())
        return estimate(plan)

    return est


def test_only_the_outermost_pause_freezes() -> None:
    gc.unfreeze()
    with collector_paused():
        with collector_paused():
            kept = [[] for _ in range(100)]
        assert gc.get_freeze_count() == 0  # the outer pause still holds
    # the last pause to end froze (or, one time in THAW_EVERY, thawed): run one more if
    # this was the thaw
    if gc.get_freeze_count() == 0:
        with collector_paused():
            pass
    assert gc.get_freeze_count() >= len(kept)
    assert gc.isenabled()


def test_one_pause_in_thaw_every_thaws() -> None:
    """Whatever pauses ran before, THAW_EVERY consecutive ones end in exactly one thaw
    (nothing frozen right after it) and freeze at the others."""
    thawed = []
    for _ in range(THAW_EVERY):
        with collector_paused():
            pass
        thawed.append(gc.get_freeze_count() == 0)
    assert thawed.count(True) == 1
    gc.unfreeze()


def test_a_disabled_collector_freezes_nothing() -> None:
    gc.unfreeze()
    gc.disable()
    try:
        for _ in range(THAW_EVERY):
            with collector_paused():
                pass
        assert gc.get_freeze_count() == 0
    finally:
        gc.enable()


def test_a_search_leaves_no_cyclic_garbage() -> None:
    """What a paused search leaves in reference cycles would be frozen and kept until the
    next thaw: a MoE search (the lattice judge, the caches, the regimes) must leave none
    (the judge's memoised bound methods once did, ~300 objects a search)."""
    plan = plan_for_model_preset("mixtral-8x7b")
    gpu_counts(plan, max_gpus=64)  # whatever the first search of a model caches for good
    gc.unfreeze()
    gc.collect()
    gc.disable()
    try:
        gpu_counts(plan_for_model_preset("qwen1.5-moe-a2.7b"), max_gpus=64)
        assert gc.collect() == 0
    finally:
        gc.enable()
