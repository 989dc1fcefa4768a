"""The analysis worker: slow parts in a child process, tagged by plan, stale ones
dropped, a superseded search killed, a dead process reported (the window keeps working)."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import engine.analysis as an
from engine.layout.counts import gpu_counts
from engine.plan import default_plan, with_value
from gui.workers.analysis_worker import WINDOW_PARTS

FAKE = Path(__file__).with_name("fake_analysis.py")
sys.path.insert(0, str(FAKE.parent))
from fake_analysis import CRASH_SEQ_LEN, HANG_SEQ_LEN, HANGING  # noqa: E402


def fake_command() -> list[str]:
    return [sys.executable, str(FAKE)]


@pytest.fixture(autouse=True)
def fresh_cache() -> Iterator[None]:
    an.forget_analyses()
    yield
    an.forget_analyses()


def _collect(worker: Any) -> dict[str, list[str]]:
    got: dict[str, list[str]] = {}
    worker.partReady.connect(lambda key, part, _v: got.setdefault(key, []).append(part))
    return got


def test_parts_arrive_in_order_from_another_process(qtbot: Any) -> None:
    """Every slow part arrives, in order, computed by a process that is not this one,
    and is kept in this process's analysis of the plan (a report finds it ready)."""
    from gui.workers.analysis_worker import AnalysisWorker

    worker = AnalysisWorker()
    got: list[tuple[str, str]] = []
    worker.partReady.connect(lambda key, part, _v: got.append((key, part)))
    plan = with_value(default_plan(), "policy.max_gpus", 64)
    worker.submit(plan)
    qtbot.waitUntil(lambda: len(got) == len(WINDOW_PARTS), timeout=60_000)
    assert got == [(plan.config_hash(), p) for p in WINDOW_PARTS]
    assert worker.pid not in (0, os.getpid())
    assert all(an.analysis(plan).computed(p) for p in WINDOW_PARTS)
    assert an.analysis(plan).counts == gpu_counts(plan)
    again: list[str] = []
    worker.partReady.connect(lambda _k, part, _v: again.append(part))
    assert worker.submit(plan) == 0  # nothing left to compute: all emitted at once
    assert again == list(WINDOW_PARTS)
    assert worker.shutdown()


def test_a_superseded_search_is_killed_and_its_parts_never_arrive(qtbot: Any) -> None:
    """A plan whose search hangs, then a newer plan: the hung process is killed after
    the grace time, a new one computes the newer plan, and nothing of the first arrives."""
    from gui.workers.analysis_worker import AnalysisWorker

    worker = AnalysisWorker(command=fake_command)
    got = _collect(worker)
    first = with_value(default_plan(), "batch.seq_len", HANG_SEQ_LEN)
    second = with_value(default_plan(), "batch.seq_len", 2048)
    worker.submit(first)
    qtbot.waitUntil(lambda: worker.pid != 0 and HANGING in worker._stderr, timeout=30_000)
    hung = worker.pid
    worker.submit(second)
    qtbot.waitUntil(
        lambda: len(got.get(second.config_hash(), [])) == len(WINDOW_PARTS), timeout=60_000
    )
    assert first.config_hash() not in got
    assert worker.pid not in (0, hung)
    qtbot.waitUntil(lambda: not worker.busy, timeout=30_000)  # its last frame: done
    assert worker.shutdown()


def test_cancel_drops_the_running_jobs_parts(qtbot: Any) -> None:
    from gui.workers.analysis_worker import AnalysisWorker

    worker = AnalysisWorker()
    got = _collect(worker)
    worker.submit(with_value(default_plan(), "batch.seq_len", 3072))
    worker.cancel()
    qtbot.waitUntil(lambda: not worker.busy, timeout=60_000)
    assert got == {}
    assert worker.shutdown()


def test_a_dead_process_is_reported_and_the_next_plan_still_computes(qtbot: Any) -> None:
    from gui.workers.analysis_worker import AnalysisWorker

    worker = AnalysisWorker(command=fake_command)
    got = _collect(worker)
    failures: list[str] = []
    worker.failed.connect(failures.append)
    worker.submit(with_value(default_plan(), "batch.seq_len", CRASH_SEQ_LEN))
    qtbot.waitUntil(lambda: bool(failures), timeout=30_000)
    assert "exited with code 3" in failures[0] and "crashed on purpose" in failures[0]
    assert not worker.busy
    plan = with_value(default_plan(), "batch.seq_len", 2048)
    worker.submit(plan)
    qtbot.waitUntil(
        lambda: len(got.get(plan.config_hash(), [])) == len(WINDOW_PARTS), timeout=60_000
    )
    assert len(failures) == 1
    assert worker.shutdown()


def test_window_shows_a_dead_worker_and_keeps_working(qtbot: Any, window: Any) -> None:
    """The worker dies: the counts line and the status bar say so, the estimate stays on
    screen, and the next edit searches again in a new process."""
    window.worker.command = fake_command
    window.doc.set("batch.seq_len", CRASH_SEQ_LEN)
    qtbot.waitUntil(lambda: "stopped" in window.statusBar().currentMessage(), timeout=30_000)
    assert "exited with code 3" in window.verdict.counts.toolTip()
    assert window.verdict.counts.text() == "layout search unavailable"
    assert window.doc.estimate is not None and window.doc.plan.batch.seq_len == CRASH_SEQ_LEN
    window.doc.set("batch.seq_len", 2048)
    qtbot.waitUntil(lambda: "arithmetic minimum" in window.verdict.counts.text(), timeout=60_000)


def test_window_searches_in_a_worker_process_and_drops_stale_parts(qtbot: Any, window: Any) -> None:
    """After an edit the counts come from the worker process; a result tagged with
    another plan's hash changes nothing on screen."""
    window.doc.set("batch.seq_len", 2048)
    qtbot.waitUntil(lambda: "arithmetic minimum" in window.verdict.counts.text(), timeout=60_000)
    assert window.worker.pid not in (0, os.getpid())
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
        ),
        timeout=60_000,
    )
    fits = [window.diagnostics.item(i).text() for i in range(window.diagnostics.count())]
    seq = an.analysis(window.doc.plan).fit.sequence
    assert f"Fit — longest sequence on this layout: {seq.answer}" in fits


def test_the_server_finds_this_checkout_first() -> None:
    """The child's path starts at the folder that holds this ``gui`` package, so a
    checkout run without installing starts its own server (gui/workers/analysis_worker
    ``server_environment``; the module sits two folders below that root)."""
    import gui
    from gui.workers.analysis_worker import server_environment

    first = server_environment().value("PYTHONPATH").split(os.pathsep)[0]
    assert Path(first) == Path(gui.__file__).resolve().parent.parent
    assert (Path(first) / "gui" / "workers" / "analysis_server.py").is_file()
