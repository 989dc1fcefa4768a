"""engine.analysis: one plan's parts, each computed once, lazily, and the same as the
engine functions it composes."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

import engine.analysis as an
from engine.errors import PlanError
from engine.layout.counts import gpu_counts
from engine.plan import default_plan, with_value
from engine.whatif.diagnostics import diagnose
from engine.whatif.fit import largest_micro_batch, longest_sequence
from engine.whatif.sensitivity import sensitivity


@pytest.fixture(autouse=True)
def fresh_cache() -> Iterator[None]:
    an.forget_analyses()
    yield
    an.forget_analyses()


def test_parts_are_the_engine_functions_results() -> None:
    """Each part equals what the function it wraps returns for the same plan: the
    analysis composes, it never computes a figure of its own."""
    plan = with_value(default_plan(), "policy.max_gpus", 64)
    a = an.analysis(plan)
    assert a.estimate.config_hash == plan.config_hash() == a.config_hash
    assert a.counts == gpu_counts(plan)
    assert a.diagnosis == diagnose(plan)
    assert a.sensitivity == tuple(sensitivity(plan))
    assert a.fit.micro_batch == largest_micro_batch(plan)
    assert a.fit.sequence == longest_sequence(plan)
    assert (a.fit.layout.tp, a.fit.layout.dp) == (plan.parallelism.tp, plan.parallelism.dp)


def test_same_plan_same_analysis_and_bounded() -> None:
    """Equal plans share one analysis; the cache keeps the last ANALYSES_KEPT plans."""
    base = default_plan()
    a = an.analysis(base)
    assert an.analysis(with_value(base, "batch.seq_len", base.batch.seq_len)) is a
    assert an.analysis(with_value(base, "batch.seq_len", 2048)) is not a
    for n in range(an.ANALYSES_KEPT):
        an.analysis(with_value(base, "batch.seq_len", 1024 + n))
    assert an.analysis(base) is not a  # dropped as least recently used, made anew


def test_parts_are_lazy_and_computed_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Asking for the estimate runs no search; asking for the counts twice searches once."""
    calls: list[str] = []

    def counting(plan: Any, **_: Any) -> Any:
        calls.append(plan.config_hash())
        return "counts"

    monkeypatch.setattr(an, "gpu_counts", counting)
    a = an.analysis(default_plan())
    assert a.estimate
    assert not a.computed("counts") and calls == []
    assert a.counts == "counts" and a.counts == "counts"  # type: ignore[comparison-overlap]
    assert a.computed("counts") and len(calls) == 1


def test_a_failing_plan_fails_every_time_but_is_computed_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls: list[int] = []

    def refuse(plan: Any) -> Any:
        calls.append(1)
        raise PlanError("parallelism.tp: 3 does not divide the 32 attention heads")

    monkeypatch.setattr(an, "estimate", refuse)
    a = an.analysis(default_plan())
    for _ in range(2):
        with pytest.raises(PlanError, match="parallelism.tp"):
            assert a.estimate
    assert calls == [1]


def test_two_threads_asking_for_one_part_compute_it_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """The window's worker and a report written meanwhile may ask at once; the part is
    searched once and both get the same object, while another part does not wait."""
    calls: list[int] = []
    started = threading.Event()

    def slow(plan: Any, **_: Any) -> object:
        calls.append(1)
        started.set()
        time.sleep(0.05)
        return object()

    monkeypatch.setattr(an, "gpu_counts", slow)
    a = an.analysis(default_plan())
    got: list[object] = []
    threads = [threading.Thread(target=lambda: got.append(a.counts)) for _ in range(3)]
    for t in threads:
        t.start()
    started.wait(5)
    assert a.estimate.world_size == 8  # not blocked by the search in progress
    for t in threads:
        t.join(5)
    assert len(calls) == 1 and len(got) == 3 and got[0] is got[1] is got[2]


def test_get_names_every_part() -> None:
    a = an.analysis(with_value(default_plan(), "policy.max_gpus", 16))
    for part in an.PARTS:
        assert a.get(part) is getattr(a, part)
