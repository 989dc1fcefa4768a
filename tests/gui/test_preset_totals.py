"""Preset parameter counts come from the analysis worker process, never the window's:
the server answers them only while no job waits, a request never abandons a job, and
the Model tab's chooser shows each count as it arrives."""

from __future__ import annotations

import io
import os
import threading
from typing import Any, BinaryIO, cast

import pytest

import engine.models.presets as presets
from engine.plan import default_plan
from gui.workers.analysis_server import TOTALS, decode, encode, serve


def _serve_in_thread(compute: Any, count: Any) -> tuple[BinaryIO, BinaryIO, threading.Thread]:
    """A server on a pair of pipes: (its stdin to write, its stdout to read, thread)."""
    in_r, in_w = os.pipe()
    out_r, out_w = os.pipe()
    inp = cast(BinaryIO, io.FileIO(in_r, "rb"))
    out = cast(BinaryIO, io.FileIO(out_w, "wb"))
    thread = threading.Thread(target=serve, args=(inp, out, compute, count), daemon=True)
    thread.start()
    return cast(BinaryIO, io.FileIO(in_w, "wb")), cast(BinaryIO, io.FileIO(out_r, "rb")), thread


def _read(out: BinaryIO, n: int) -> list[Any]:
    """The next ``n`` messages from the server."""
    buffer, got = bytearray(), []
    while len(got) < n:
        chunk = out.read(65536)
        assert chunk, f"server closed after {got}"
        buffer += chunk
        got += decode(buffer)
    return got


def test_a_waiting_job_comes_before_the_totals_and_is_not_abandoned_by_them() -> None:
    """Totals asked before a job, and more asked while it runs: the job's every part
    is answered first (a request is idle work, not a newer job), then each total."""
    plan = default_plan()
    asked = threading.Event()

    def compute(_plan: Any, name: str) -> object:
        if name == "counts":
            asked.wait(30)  # the second request arrives while this part computes
        return f"value of {name}"

    counted: list[str] = []

    def count(key: str) -> int:
        counted.append(key)
        return len(key)

    inp, out, thread = _serve_in_thread(compute, count)
    assert _read(out, 1)[0][0] == "ready"
    inp.write(encode((TOTALS, ("gpt2", "phi-3-mini"))) + encode((7, plan, ("counts", "fit"))))
    inp.flush()
    inp.write(encode((TOTALS, ("llama-3.1-8b",))))
    inp.flush()
    asked.set()
    got = _read(out, 6)
    key = plan.config_hash()
    assert got == [
        (7, key, "counts", "value of counts"),
        (7, key, "fit", "value of fit"),
        (7, key, None, None),
        ("total", "gpt2", 4),
        ("total", "phi-3-mini", 10),
        ("total", "llama-3.1-8b", 12),
    ]
    inp.close()
    thread.join(30)
    assert not thread.is_alive() and counted == ["gpt2", "phi-3-mini", "llama-3.1-8b"]


def test_model_tab_shows_counts_the_window_s_process_never_computed(
    qtbot: Any, window: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every preset's chooser text gains its exact count, computed in the worker process:
    here, counting a preset (building its inventory) would raise."""
    expected = {k: presets.exact_total(k) for k in ("gpt2", "deepseek-v3")}
    expected["llama-3.1-8b"] = 8_030_261_248

    def refuse(key: str) -> int:
        raise AssertionError(f"the window's process counted {key}")

    monkeypatch.setattr(presets, "exact_total", refuse)
    tab = window.tabs["model"]
    texts = lambda: [tab.preset.itemText(i) for i in range(tab.preset.count())]  # noqa: E731
    qtbot.waitUntil(lambda: all(t.endswith(" params") for t in texts()), timeout=120_000)
    for key, total in expected.items():
        assert tab.preset.itemText(tab.preset.findData(key)).endswith(f" — {total:,} params")
    assert set(window.worker.totals) == {tab.preset.itemData(i) for i in range(tab.preset.count())}


def test_counts_still_wanted_are_asked_again_of_a_new_process(qtbot: Any) -> None:
    """A process killed (as a superseded search is) before it answered: the next one is
    asked for the counts not yet answered, and answers them."""
    from gui.workers.analysis_worker import AnalysisWorker

    worker = AnalysisWorker()
    got: dict[str, int] = {}
    worker.totalReady.connect(lambda key, total: got.__setitem__(key, total))
    worker.request_totals(["deepseek-v3"])
    worker._discard_process()  # before its answer: the count is still wanted
    worker.request_totals(["gpt2"])  # starts a new process, which gets both
    qtbot.waitUntil(lambda: len(got) == 2, timeout=120_000)
    assert got == {"deepseek-v3": presets.exact_total("deepseek-v3"), "gpt2": 124_439_808}
    assert worker.shutdown()
