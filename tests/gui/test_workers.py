"""The analysis worker: slow parts off the GUI thread, tagged by plan, stale ones dropped."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest

import engine.analysis as an
from engine.layout.counts import gpu_counts
from engine.plan import default_plan, with_value


@pytest.fixture(autouse=True)
def fresh_cache() -> Iterator[None]:
    an.forget_analyses()
    yield
    an.forget_analyses()


def _counting_search(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Record the thread each layout search runs on (and search as usual)."""
    threads: list[int] = []

    def search(plan: Any, **_: Any) -> Any:
        threads.append(threading.get_ident())
        return gpu_counts(plan)

    monkeypatch.setattr(an, "gpu_counts", search)
    return threads


def test_parts_arrive_in_order_from_another_thread(
    qtbot: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from gui.workers import AnalysisWorker

    threads = _counting_search(monkeypatch)
    worker = AnalysisWorker()
    got: list[tuple[str, str]] = []
    worker.partReady.connect(lambda key, part, _v: got.append((key, part)))
    plan = with_value(default_plan(), "policy.max_gpus", 64)
    worker.submit(plan)
    qtbot.waitUntil(lambda: len(got) == len(an.SLOW_PARTS), timeout=60_000)
    assert got == [(plan.config_hash(), p) for p in an.SLOW_PARTS]
    assert threads and threading.get_ident() not in threads
    assert worker.shutdown()


def test_a_newer_plan_supersedes_the_queued_one(
    qtbot: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two plans asked for in a row: every part of the second arrives; of the first, at
    most the part in progress when it was superseded (never the rest). The search is
    held until both were asked for, so the order does not depend on the machine's speed."""
    from gui.workers import AnalysisWorker

    release = threading.Event()

    def held_search(plan: Any, **_: Any) -> Any:
        release.wait(30)
        return gpu_counts(plan)

    monkeypatch.setattr(an, "gpu_counts", held_search)
    worker = AnalysisWorker()
    got: dict[str, list[str]] = {}
    worker.partReady.connect(lambda key, part, _v: got.setdefault(key, []).append(part))
    first = with_value(default_plan(), "policy.max_gpus", 32)
    second = with_value(default_plan(), "policy.max_gpus", 48)
    worker.submit(first)
    worker.submit(second)
    release.set()
    qtbot.waitUntil(lambda: len(got.get(second.config_hash(), [])) == len(an.SLOW_PARTS))
    assert worker.shutdown()
    assert len(got.get(first.config_hash(), [])) <= 1


def test_window_searches_off_the_gui_thread_and_drops_stale_parts(
    qtbot: Any, window: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """After an edit the counts are searched on the worker, never on the GUI thread; a
    result tagged with another plan's hash changes nothing on screen."""
    threads = _counting_search(monkeypatch)
    window.doc.set("batch.seq_len", 2048)
    qtbot.waitUntil(lambda: "arithmetic minimum" in window.verdict.counts.text())
    assert threads and threading.get_ident() not in threads
    shown = window.verdict.counts.text()
    other = with_value(window.doc.plan, "hardware.usable_hbm_bytes", 10**9)
    stale = gpu_counts(other)
    assert stale.first_layout.gpus != an.analysis(window.doc.plan).counts.first_layout.gpus
    window.worker.partReady.emit(other.config_hash(), "counts", stale)
    qtbot.wait(50)
    assert window.verdict.counts.text() == shown
    qtbot.waitUntil(
        lambda: any(
            window.diagnostics.item(i).text().startswith("Fit — longest sequence")
            for i in range(window.diagnostics.count())
        )
    )
    fits = [window.diagnostics.item(i).text() for i in range(window.diagnostics.count())]
    seq = an.analysis(window.doc.plan).fit.sequence
    assert f"Fit — longest sequence on this layout: {seq.answer}" in fits
