"""Probes for ``tests/bench_gui.py`` (run by hand, prints numbers; not a test): the
event-loop gap, the cyclic collector's pauses, edits while a thread searches, and a long
session of presets and edits.

They measure what the window's interpreter policies (``gui/workers/gc_policy.py``,
``gui/workers/gil_policy.py``) are there for: a policy's docstring says why it exists, the
figures that show it are printed here.
"""

from __future__ import annotations

import gc
import time
from typing import Any


class StallProbe:
    """A 10 ms timer on the GUI thread; ``worst`` is the largest gap between ticks and
    ``worst_cpu`` the GUI thread's own CPU time within it: a gap the GUI thread spent
    working is the window's; one it spent waiting (for the GIL held by the analysis
    thread, or for a core on a shared machine) shows as CPU time well below the gap.
    ``busiest`` is the most CPU time the GUI thread spent between two ticks: the
    window's longest turn of work, whatever the machine's load made of its wall time."""

    INTERVAL_MS = 10

    def __init__(self) -> None:
        from PySide6.QtCore import QTimer

        self.timer = QTimer()
        self.timer.setInterval(self.INTERVAL_MS)
        self.timer.timeout.connect(self._tick)
        self.last = self.last_cpu = 0.0
        self.worst = self.worst_cpu = self.busiest = 0.0

    def start(self) -> None:
        self.last, self.worst = time.perf_counter(), 0.0
        self.last_cpu, self.worst_cpu, self.busiest = time.thread_time(), 0.0, 0.0
        self.timer.start()

    def _tick(self) -> None:
        now, cpu = time.perf_counter(), time.thread_time()
        self.busiest = max(self.busiest, cpu - self.last_cpu)
        if now - self.last > self.worst:
            self.worst, self.worst_cpu = now - self.last, cpu - self.last_cpu
        self.last, self.last_cpu = now, cpu

    def stop(self) -> float:
        self._tick()
        self.timer.stop()
        return self.worst


class CollectorWatch:
    """The cyclic collector's pauses in the window's process (``gc.callbacks``): per
    generation, how many collections ran and the longest (wall seconds). A collection
    runs in whichever thread allocates, holding the GIL, so its pause is a pause of the
    GUI thread whichever thread it ran in."""

    def __init__(self) -> None:
        self.count = [0, 0, 0]
        self.longest = [0.0, 0.0, 0.0]
        self._start = 0.0

    def _callback(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._start = time.perf_counter()
            return
        gen = info["generation"]
        self.count[gen] += 1
        self.longest[gen] = max(self.longest[gen], time.perf_counter() - self._start)

    def __enter__(self) -> CollectorWatch:
        gc.callbacks.append(self._callback)
        return self

    def __exit__(self, *_exc: object) -> None:
        gc.callbacks.remove(self._callback)

    def line(self) -> str:
        """The pauses seen, then what a full collection of the process costs now (what
        the next generation-2 collection scans: every tracked object not frozen)."""
        t0, c0 = time.perf_counter(), time.thread_time()
        gc.collect()
        full, full_cpu = time.perf_counter() - t0, time.thread_time() - c0
        seen = ", ".join(
            f"gen {g}: {n} (longest {t * 1e3:.1f} ms)"
            for g, (n, t) in enumerate(zip(self.count, self.longest, strict=True))
        )
        return (
            f"cyclic collector in the window's process: {seen}; a full collection now "
            f"{full * 1e3:.1f} ms ({full_cpu * 1e3:.1f} ms CPU) over {len(gc.get_objects()):,} "
            "tracked objects "
            f"({gc.get_freeze_count():,} frozen)"
        )


def settle(app: Any, seconds: float, until: Any = None) -> None:
    """Run the event loop for ``seconds``, or until ``until()`` says so."""
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        app.processEvents()
        if until is not None and until():
            return
        time.sleep(0.002)


def edit_during_thread_search(
    win: Any, app: Any, names: list[str], repeat: int
) -> tuple[list[float], list[float], float]:
    """Edit → chart painted while GPU-count searches of ``names`` run on a pool thread of
    the window's process, as a comparison runs them (``gui/compare``, a
    :class:`gui.workers.workers.TaskRunner`): (wall seconds per edit, the GUI thread's
    CPU seconds per edit, the largest event-loop gap meanwhile). The thread searches
    one fresh plan after another (a new sequence length each, so no cached answer)
    until the edits are done; the GUI thread then shares the interpreter with it."""
    from engine.layout.counts import gpu_counts
    from engine.plan import with_values
    from engine.presets import model_section_for
    from gui.workers.workers import TaskRunner

    plans = []
    for name in names:
        sec = model_section_for(name).model_dump(mode="json")
        plans.append(with_values(win.doc.plan, {f"model.{k}": v for k, v in sec.items()}))
    searched = [0]

    def search(progress: Any) -> int:
        seq = 1024
        while progress(searched[0], 0):
            for plan in plans:
                gpu_counts(with_values(plan, {"batch.seq_len": seq}))
                searched[0] += 1
            seq += 64
        return searched[0]

    runner = TaskRunner()
    runner.start(search)
    settle(app, 0.5, until=lambda: searched[0] > 0)  # the thread is in its stride
    probe = StallProbe()
    probe.start()
    doc, out, cpu = win.doc, [], []
    for i in range(repeat + 1):
        t0, c0 = time.perf_counter(), time.thread_time()
        doc.set("batch.seq_len", 4096 if i % 2 else 2048, merge=False)
        doc.flush()
        win.chart.repaint()
        t1, c1 = time.perf_counter(), time.thread_time()
        if i:
            out.append(t1 - t0)
            cpu.append(c1 - c0)
        settle(app, 0.02)
    gap = probe.stop()
    runner.shutdown()
    print(f"  (the thread searched {searched[0]} plans meanwhile)")
    return out, cpu, gap


def long_session(win: Any, app: Any, names: list[str], edits: int) -> tuple[float, float]:
    """Every preset of ``names`` applied, then ``edits`` edits of it, as a long session of
    a user exploring models: (the largest event-loop gap, the GUI thread's busiest turn).
    Run it inside a :class:`CollectorWatch` to see whether a full collection came (the
    engine's caches fill with each model, so the heap the collector walks grows)."""
    tab = win.tabs["model"]
    probe = StallProbe()
    probe.start()
    busiest = 0.0
    for name in names:
        tab.preset.setCurrentIndex(tab.preset.findData(name))
        tab.apply_preset()  # as the Apply button does
        settle(app, 0.05)
        for i in range(edits):
            win.doc.set("batch.seq_len", 2048 + 64 * (i % 7), merge=False)
            settle(app, 0.01)
        busiest = max(busiest, probe.busiest)
    probe.stop()
    return probe.worst, max(busiest, probe.busiest)
