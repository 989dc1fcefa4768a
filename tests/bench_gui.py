"""Benchmark of the window's responsiveness — run by hand, prints numbers (not a test).

    QT_QPA_PLATFORM=offscreen PYTHONPATH=. python tests/bench_gui.py [--repeat N]
        [--presets all|NAME,NAME] [--stall-seconds S] [--session-edits N]
        [--skip cold,report,paint,stall,session,thread]

Measures, each as a median (and the worst where it matters):

* **edit → chart painted**: ``PlanDocument.set`` of one field, the recompute, every view's
  redraw and a synchronous repaint of the chart, for the default plan and for Llama-405B
  on TP 8 × PP 16 (16 stage bars). Alternates two values so every repeat is a change.
* **event-loop stall after an edit, per preset**: a ``QTimer`` at 10 ms records the
  largest gap between its ticks while the window applies a preset, then edits the
  sequence length, and the background analysis (GPU-count search, diagnostics, fit,
  sensitivity) runs to its end or for ``--stall-seconds``. A gap is the time the GUI
  thread could not run its event loop (the target: none over 100 ms). Every preset gets
  a line with that gap and the GUI thread's busiest turn (its most CPU between two
  ticks): a gap far above the busiest turn was spent waiting for a core, not working.
* **the cyclic collector** in the window's process (``gui/workers/gc_policy.py``): the
  collections each generation ran while the above ran and the longest, then what a full
  collection costs now and over how many objects (frozen ones are skipped).
* **a long session** (``session``): every preset of ``--presets`` applied and then edited
  ``--session-edits`` times, with the largest gap, the busiest turn and the collector's
  pauses: what a full collection of a grown heap costs the window, if one comes.
* **edit → chart painted during a thread's search** (``thread``): the edits above while a
  pool thread of the window's process runs GPU-count searches of DeepSeek-V3 and
  Llama-4-Maverick, as a comparison does: what the GIL switch interval
  (``gui/workers/gil_policy.py``) is for.
* **cold start to window**: a fresh interpreter from start to the main window shown and
  its first events processed (``--repeat`` runs).
* **memplan report**: the CLI writing the default plan's PDF, end to end.

Each figure comes with the CPU time it cost (the process's, or the GUI thread's for a
stall): on a machine shared with other jobs the wall time includes waiting for a core,
and the CPU time tells the window's own cost apart. The load average is printed first.

No assertion is made: the numbers are for the issue's record (tests never time).
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench_gui_probes import (
    CollectorWatch,
    StallProbe,
    edit_during_thread_search,
    long_session,
    settle,
)

ROOT = Path(__file__).resolve().parent.parent

PP16 = {
    "parallelism.strategy": "megatron_distopt",
    "parallelism.tp": 8,
    "parallelism.pp": 16,
    "parallelism.dp": 4,
    "method.recompute.policy": "full",
    "batch.grad_accum": 16,
}
"""Llama-3.1-405B on TP 8 × PP 16 × DP 4 (the golden case 405b-tp8-pp16)."""

COLD_CHILD = """
import time, sys
t0 = float(sys.argv[1])
from gui.app import make_app
app = make_app()
from gui.main_window import MainWindow
from gui.settings import Settings
w = MainWindow(Settings())
w.show()
app.processEvents()
print(time.time() - t0, time.process_time(), flush=True)
w.doc.undo_stack.setClean()
w.close()
from shiboken6 import delete
delete(w)  # before QApplication goes: a window alive at exit crashes the interpreter
"""


def _env(tmp: str) -> dict[str, str]:
    """The child's environment: isolated settings, and bytecode cached as an installed
    app has it (under the temporary folder; the first run, which compiles, is dropped).
    A shell with PYTHONDONTWRITEBYTECODE would otherwise compile ~180 modules per start."""
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPYCACHEPREFIX"] = str(Path(tmp) / "pycache")
    env.setdefault("QT_QPA_PLATFORM", "offscreen")
    env["MEMPLAN_CONFIG_DIR"] = str(Path(tmp) / "config")
    env["MEMPLAN_STATE_DIR"] = str(Path(tmp) / "state")
    env["PYTHONPATH"] = str(ROOT)
    return env


def cold_start(repeat: int) -> list[tuple[float, float]]:
    """(wall, CPU) seconds from the interpreter's start to the window shown, per run."""
    out = []
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(repeat + 1):
            t0 = time.time()
            got = subprocess.run(
                [sys.executable, "-c", COLD_CHILD, repr(t0)],
                env=_env(tmp),
                capture_output=True,
                text=True,
                check=True,
                cwd=ROOT,
            )
            if i:  # the first run compiled the bytecode
                wall, cpu = got.stdout.strip().splitlines()[-1].split()
                out.append((float(wall), float(cpu)))
    return out


def _children_cpu() -> float:
    use = resource.getrusage(resource.RUSAGE_CHILDREN)
    return use.ru_utime + use.ru_stime


def report_cli(repeat: int) -> list[tuple[float, float]]:
    """(wall, CPU) seconds for ``memplan report -o FILE`` of the default plan, per run."""
    out = []
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(repeat + 1):
            t0, c0 = time.perf_counter(), _children_cpu()
            subprocess.run(
                [sys.executable, "-m", "gui", "report", "-o", str(Path(tmp) / "r.pdf")],
                env=_env(tmp),
                capture_output=True,
                check=True,
                cwd=ROOT,
            )
            if i:  # the first run compiled the bytecode
                out.append((time.perf_counter() - t0, _children_cpu() - c0))
    return out


def edit_to_paint(
    win: Any, app: Any, sets: dict[str, Any], repeat: int
) -> tuple[list[float], list[float]]:
    """Seconds from an edit to the chart repainted, per repeat (see the module doc): wall
    time, and the process's CPU time (on a machine shared with other jobs the wall time
    includes waiting for a core; the CPU time does not)."""
    doc = win.doc
    if sets:
        doc.set_many(sets, "bench")
        doc.flush()
    settle(app, 0.5)
    out, cpu = [], []
    for i in range(repeat + 1):
        value = 4096 if i % 2 else 2048
        t0, c0 = time.perf_counter(), time.process_time()
        doc.set("batch.seq_len", value, merge=False)
        doc.flush()
        win.chart.repaint()
        t1, c1 = time.perf_counter(), time.process_time()
        if i:  # the first is a warm-up
            out.append(t1 - t0)
            cpu.append(c1 - c0)
        settle(app, 0.02)
    return out, cpu


def _shown(win: Any, preset: str) -> bool:
    """Whether the window shows ``preset``'s plan settled: applied, its estimate on
    screen (not an older plan's)."""
    doc = win.doc
    if doc.plan.model.preset != preset or doc.pending:
        return False
    est = doc.estimate
    return doc.stale or (est is not None and est.config_hash == doc.plan.config_hash())


def stall_per_preset(
    win: Any, app: Any, names: list[str], seconds: float
) -> list[tuple[str, float, float, float, float, float, float]]:
    """(preset, worst gap while applying it, worst gap after an edit, seconds until the
    analysis finished, GUI-thread CPU within the edit's worst gap, the GUI thread's
    busiest turn after the edit, its busiest turn applying the preset) per preset."""

    probe = StallProbe()
    out = []
    tab = win.tabs["model"]
    for name in names:
        settle(app, 0.1)
        probe.start()
        t0 = time.perf_counter()
        tab.preset.setCurrentIndex(tab.preset.findData(name))
        tab.apply_preset()  # as the Apply button does
        settle(app, seconds, until=lambda n=name: _shown(win, n))
        applied = probe.stop()
        apply_turn = probe.busiest
        settle(app, 0.3)
        probe.start()
        win.doc.set("batch.seq_len", 2048, merge=False)
        settle(app, 0.3)
        settle(app, seconds, until=lambda: not win.worker.busy)
        done = time.perf_counter() - t0
        out.append((name, applied, probe.stop(), done, probe.worst_cpu, probe.busiest, apply_turn))
        win.doc.set("batch.seq_len", 4096, merge=False)
        settle(app, 0.05)
    return out


def _spread(runs: list[tuple[float, float]]) -> str:
    wall, cpu = [w for w, _ in runs], [c for _, c in runs]
    return (
        f"median {statistics.median(wall):.3f} s (min {min(wall):.3f}, max {max(wall):.3f}, "
        f"{len(runs)} runs; CPU median {statistics.median(cpu):.3f} s)"
    )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--presets", default="all")
    ap.add_argument("--stall-seconds", type=float, default=40.0)
    ap.add_argument("--session-edits", type=int, default=40)
    ap.add_argument("--skip", default="")
    args = ap.parse_args()
    skip = set(filter(None, args.skip.split(",")))
    print(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    with tempfile.TemporaryDirectory() as tmp:
        os.environ.update({k: v for k, v in _env(tmp).items() if k.startswith("MEMPLAN_")})
        if "cold" not in skip:
            print("cold start to window:", _spread(cold_start(args.repeat)))
        if "report" not in skip:
            print("memplan report (default plan):", _spread(report_cli(max(3, args.repeat // 2))))
        from gui.app import make_app
        from gui.main_window import MainWindow
        from gui.settings import Settings

        app = make_app()
        watch = CollectorWatch().__enter__()
        win = MainWindow(Settings(), autosave_ms=3_600_000)
        win.resize(1366, 740)
        win.show()
        settle(app, 1.0)
        if "paint" not in skip:
            for label, sets in (("default plan", {}), ("405B TP8 × PP16", {**PP16})):
                if sets:
                    from engine.presets import model_section_for

                    sec = model_section_for("llama-3.1-405b").model_dump(mode="json")
                    sets = {**{f"model.{k}": v for k, v in sec.items()}, **sets}
                runs, cpu = edit_to_paint(win, app, sets, args.repeat * 3)
                print(
                    f"edit → chart painted, {label}: median {statistics.median(runs) * 1e3:.1f} ms "
                    f"(max {max(runs) * 1e3:.1f} ms, {len(runs)} edits; CPU median "
                    f"{statistics.median(cpu) * 1e3:.1f} ms)"
                )
            win.doc.new()
            settle(app, 0.5)
        from engine.models.presets import preset_names

        names = preset_names() if args.presets == "all" else args.presets.split(",")
        if "stall" not in skip:
            results = stall_per_preset(win, app, names, args.stall_seconds)
            print(
                "per preset, worst first: the largest event-loop gap applying it (with the GUI "
                "thread's busiest turn) and after "
                "an edit (wall), the GUI thread's CPU within that gap, and its busiest turn "
                "(CPU between two ticks: the window's own work, whatever the load)"
            )
            ranked = sorted(results, key=lambda r: -max(r[1:3]))
            for name, applied, gap, done, busy, turn, apply_turn in ranked:
                print(
                    f"  apply {applied * 1e3:6.1f} ms (busiest turn {apply_turn * 1e3:5.1f} ms)"
                    f"  edit {gap * 1e3:6.1f} ms "
                    f"(GUI thread busy {busy * 1e3:5.1f} ms of it; busiest turn "
                    f"{turn * 1e3:5.1f} ms)  analysis {done:6.2f} s  {name}"
                )
            for what, i in (("applying a preset", 1), ("an edit", 2)):
                worst = max(results, key=lambda r: r[i])
                over = sum(1 for r in results if r[i] > 0.100)
                print(
                    f"event-loop stall, {what}: worst {worst[i] * 1e3:.1f} ms ({worst[0]}), "
                    f"{over} of {len(results)} presets over 100 ms"
                )
            for what, i in (("applying a preset", 6), ("after an edit", 5)):
                turn = max(results, key=lambda r: r[i])
                print(f"GUI thread's busiest turn {what}: {turn[i] * 1e3:.1f} ms CPU ({turn[0]})")
        watch.__exit__()
        print(watch.line())
        if "session" not in skip:
            with CollectorWatch() as watch:
                gap, turn = long_session(win, app, names, args.session_edits)
            print(
                f"long session ({len(names)} presets × {args.session_edits} edits): largest "
                f"event-loop gap {gap * 1e3:.1f} ms, GUI thread's busiest turn {turn * 1e3:.1f} ms "
                f"CPU; {watch.line()}"
            )
            win.doc.new()
            settle(app, 0.5)
        if "thread" not in skip:
            slow = ["deepseek-v3", "llama-4-maverick"]
            runs, cpu, gap = edit_during_thread_search(win, app, slow, args.repeat * 3)
            print(
                f"edit → chart painted during a thread's search ({', '.join(slow)}): median "
                f"{statistics.median(runs) * 1e3:.1f} ms (max {max(runs) * 1e3:.1f} ms, "
                f"{len(runs)} edits; GUI thread CPU median {statistics.median(cpu) * 1e3:.1f} ms); "
                f"largest event-loop gap {gap * 1e3:.1f} ms"
            )
            win.doc.new()
            settle(app, 0.5)
        win.doc.undo_stack.setClean()
        win.close()
        from shiboken6 import delete

        delete(win)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
