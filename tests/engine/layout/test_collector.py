"""The search's collector pause: counted, restoring only what it changed."""

from __future__ import annotations

import gc
import threading

from engine.estimate import Estimate, estimate
from engine.layout.collector import collector_paused
from engine.layout.counts import gpu_counts
from engine.layout.evaluate import Estimator
from engine.plan import Plan, default_plan


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
