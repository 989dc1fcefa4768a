"""Autosave and crash recovery: per instance and window, nothing deleted until safe.

Crashed instances are simulated by the files they leave (an autosave, its sidecar and a
lock file nobody holds) with the pid of a process that has exited; ``tests/fuzz`` kills
real app processes.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from engine import planfile
from engine.plan import default_plan
from gui import app, dialogs
from gui.document import PlanDocument
from gui.files import autosave, recovery
from gui.files.autosave import Autosaver, find_orphans
from gui.files.instance import Claim, is_running, lock_path
from tests.fuzz.crashed import crashed_autosave, hashes_on_disk, plan_with

SEQ_LENS = (1111, 2222, 3333)


@pytest.fixture
def folder(isolated_dirs: Path) -> Path:
    return isolated_dirs / "state"


@pytest.fixture
def answer(monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """The user's choice for every row of the recovery dialog (tests set it)."""
    chosen = {"choice": "restore"}

    def ask(_parent: object, orphans: list[autosave.Orphan]) -> dict[Path, str]:
        return {o.plan_path: chosen["choice"] for o in orphans}

    monkeypatch.setattr(dialogs, "ask_recovery", ask)
    return chosen


def test_row1_two_crashed_instances_are_both_offered_and_neither_is_lost(
    qtbot: Any, window: Any, folder: Path, dead_pid: int, answer: dict[str, str]
) -> None:
    """Issue 21 row 1: recovery used to keep the newest crashed instance and delete the
    rest unasked. Now each is restored into a window of its own."""
    for i, seq in enumerate(SEQ_LENS[:2]):
        crashed_autosave(folder, plan_with(seq), dead_pid, instance=f"dead0{i}")
    wanted = {plan_with(s).config_hash() for s in SEQ_LENS[:2]}
    opened: list[Any] = []

    def open_window() -> Any:
        opened.append(app.new_window())
        return opened[-1]

    assert recovery.offer_recovery(window, open_window, folder)
    windows = [window, *opened]
    assert {w.doc.plan.config_hash() for w in windows} == wanted
    assert all(w.doc.dirty for w in windows)
    assert hashes_on_disk(folder) == wanted  # each now in its new window's autosave
    for w in opened:
        w.doc.undo_stack.setClean()
        w.close()


def test_row2_a_recovered_plan_is_autosaved_before_the_old_autosave_goes(
    qtbot: Any, window: Any, folder: Path, dead_pid: int, answer: dict[str, str]
) -> None:
    """Issue 21 row 2: the old autosave was deleted at once and the new one written ~5 s
    later, so a second crash in between lost the plan. Now the window's own autosave is
    written first; at no moment is the plan only in memory."""
    old = crashed_autosave(folder, plan_with(4444), dead_pid)
    deleted_while_protected: list[bool] = []
    real_discard = autosave.discard

    def discard(orphan: autosave.Orphan) -> None:
        deleted_while_protected.append(window.autosaver.plan_path.exists())
        real_discard(orphan)

    answer["choice"] = "restore"
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(autosave, "discard", discard)
        assert recovery.offer_recovery(window, None, folder)
    assert deleted_while_protected == [True] and not old.exists()
    assert planfile.load(window.autosaver.plan_path).config_hash == plan_with(4444).config_hash()


@pytest.mark.parametrize("choice", ["later", "discard", "save"])
def test_each_choice_keeps_or_removes_only_what_it_says(
    qtbot: Any,
    window: Any,
    folder: Path,
    dead_pid: int,
    answer: dict[str, str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    choice: str,
) -> None:
    path = crashed_autosave(folder, plan_with(5555), dead_pid, original=str(tmp_path / "o.memplan"))
    saved_to = tmp_path / "saved.memplan"
    monkeypatch.setattr(dialogs, "save_path", lambda _p, suggestion: str(saved_to))
    answer["choice"] = choice
    assert not recovery.offer_recovery(window, None, folder)
    assert path.exists() == (choice == "later")
    assert saved_to.exists() == (choice == "save")
    if choice == "save":
        assert planfile.load(saved_to).config_hash == plan_with(5555).config_hash()
    assert window.doc.plan == default_plan()  # nothing was restored into the window


def test_a_cancelled_save_keeps_the_autosave(
    qtbot: Any, window: Any, folder: Path, dead_pid: int, answer: dict[str, str], monkeypatch: Any
) -> None:
    path = crashed_autosave(folder, plan_with(5656), dead_pid)
    monkeypatch.setattr(dialogs, "save_path", lambda *_a: "")
    answer["choice"] = "save"
    recovery.offer_recovery(window, None, folder)
    assert path.exists()


def test_a_running_instances_autosave_is_never_offered(
    qtbot: Any, folder: Path, dead_pid: int
) -> None:
    """Another running instance holds its lock: its autosave is not an orphan, even
    though its files look exactly like a crashed one's."""
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import fcntl, sys, time; f = open(sys.argv[1], 'a+b'); "
            "fcntl.flock(f, fcntl.LOCK_EX); print('held', flush=True); time.sleep(60)",
            str(lock_path(folder, "alive1")),
        ],
        stdout=subprocess.PIPE,
    )
    try:
        folder.mkdir(parents=True, exist_ok=True)
        assert holder.stdout is not None and holder.stdout.readline().strip() == b"held"
        crashed_autosave(folder, plan_with(6666), holder.pid, instance="alive1")
        assert is_running(folder, "alive1", holder.pid)
        assert find_orphans(folder) == []
    finally:
        holder.kill()
        holder.wait()
    assert [o.name for o in find_orphans(folder)] == ["plan 6666"]  # now it crashed


def test_a_reused_pid_does_not_hide_a_crash(qtbot: Any, folder: Path) -> None:
    """The pid in the autosave belongs to a live process again (here: our parent), but
    nobody holds the instance's lock: the instance crashed."""
    crashed_autosave(folder, plan_with(7777), os.getppid(), instance="reused")
    assert [o.config_hash for o in find_orphans(folder)] == [plan_with(7777).config_hash()]


def test_an_orphan_claimed_by_another_starting_instance_is_not_offered_twice(
    qtbot: Any, window: Any, folder: Path, dead_pid: int, answer: dict[str, str]
) -> None:
    path = crashed_autosave(folder, plan_with(8888), dead_pid)
    other = Claim(path)
    assert other.take()
    try:
        assert not recovery.offer_recovery(window, None, folder)
        assert path.exists() and window.doc.plan == default_plan()
    finally:
        other.release(remove=False)


def test_orphans_list_name_time_size_and_hash(qtbot: Any, folder: Path, dead_pid: int) -> None:
    path = crashed_autosave(folder, plan_with(1234), dead_pid, original="/x/p.memplan")
    (orphan,) = find_orphans(folder)
    assert (orphan.name, orphan.original, orphan.saved_at) == (
        "plan 1234",
        "/x/p.memplan",
        "2025-01-01T10:00:00",
    )
    assert orphan.size == path.stat().st_size and orphan.problem is None
    assert orphan.config_hash == plan_with(1234).config_hash()


def test_an_unreadable_autosave_is_listed_with_its_problem_and_can_be_discarded(
    qtbot: Any, window: Any, folder: Path, dead_pid: int, answer: dict[str, str]
) -> None:
    path = crashed_autosave(folder, plan_with(1), dead_pid)
    path.write_text("[" * 500, encoding="utf-8")
    (orphan,) = find_orphans(folder)
    assert orphan.problem and "levels deep" in orphan.problem
    answer["choice"] = "discard"
    recovery.offer_recovery(window, None, folder)
    assert not path.exists()


def test_undo_then_a_different_edit_is_autosaved_again(qtbot: Any, folder: Path) -> None:
    """The same undo index with different content must not be skipped."""
    doc = PlanDocument()
    saver = Autosaver(doc, directory=folder, interval_ms=3_600_000)
    doc.set("batch.seq_len", 2048, merge=False)
    doc.set("batch.micro_batch", 2, merge=False)
    assert saver.tick()
    doc.undo_stack.undo()
    doc.set("batch.micro_batch", 3, merge=False)
    assert saver.tick()
    assert planfile.load(saver.plan_path).plan.batch.micro_batch == 3


def test_each_window_has_its_own_autosave(qtbot: Any, folder: Path) -> None:
    a, b = PlanDocument(), PlanDocument()
    sa = Autosaver(a, directory=folder, interval_ms=3_600_000)
    sb = Autosaver(b, directory=folder, interval_ms=3_600_000)
    a.set("batch.seq_len", 1024)
    b.set("batch.seq_len", 512)
    assert sa.tick() and sb.tick() and sa.plan_path != sb.plan_path
    assert sa.instance is sb.instance
    a.save(folder.parent / "a.memplan")
    assert not sa.plan_path.exists() and sb.plan_path.exists()


def test_a_failed_autosave_says_why(qtbot: Any, tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("x", encoding="utf-8")
    doc = PlanDocument()
    saver = Autosaver(doc, directory=blocker / "autosave", interval_ms=3_600_000)
    doc.set("batch.seq_len", 1024)
    with qtbot.waitSignal(saver.failed) as signal:
        assert not saver.tick()
    assert "cannot autosave" in signal.args[0] and saver.error == signal.args[0]


def test_tidy_removes_only_unheld_leftovers(qtbot: Any, folder: Path, dead_pid: int) -> None:
    keep = crashed_autosave(folder, plan_with(2), dead_pid, instance="keep01")
    lock_path(folder, "gone01").write_text("{}", encoding="utf-8")
    (folder / "autosave-gone01-1-w1.claim").write_text("", encoding="utf-8")
    autosave.instance_for(folder)  # ours, held
    autosave.tidy(folder)
    names = {p.name for p in folder.iterdir()}
    assert keep.name in names and "instance-keep01.lock" in names
    assert "instance-gone01.lock" not in names and "autosave-gone01-1-w1.claim" not in names
    assert autosave.instance_for(folder).path.name in names


def test_the_recovery_dialog_lists_each_plan_and_returns_each_choice(
    qtbot: Any, folder: Path, dead_pid: int
) -> None:
    from gui.files.recovery_dialog import COLUMNS, RecoveryDialog

    good = crashed_autosave(folder, plan_with(3000), dead_pid, original="/p/mine.memplan")
    bad = crashed_autosave(folder, plan_with(3001), dead_pid, instance="dead02")
    bad.write_text("{", encoding="utf-8")
    orphans = sorted(find_orphans(folder), key=lambda o: o.problem is not None)
    dialog = RecoveryDialog(None, orphans)
    qtbot.addWidget(dialog)
    cells = [[dialog.table.item(r, c).text() for c in range(len(COLUMNS) - 1)] for r in (0, 1)]
    assert cells[0][:2] == ["plan 3000", "mine.memplan"]
    assert cells[0][2] == "2025-01-01 10:00:00" and cells[0][3].endswith(" B")
    assert cells[0][4] == plan_with(3000).config_hash()[:12]
    assert cells[1][0].startswith("(cannot be read: not a MemPlan file")
    assert dialog.combos[1].count() == 2  # an unreadable one: discard or later only
    dialog.set_choice(0, "save")
    assert dialog.choices() == {good: "save", bad: "later"}


def test_memplan_file_with_a_bad_file_opens_the_window_with_the_error(
    qtbot: Any, isolated_dirs: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What a double-click on a broken plan runs: the window opens on the default plan
    and a dialog says why the file was not opened (it used to exit at start)."""
    shown: list[str] = []
    monkeypatch.setattr(dialogs, "show_error", lambda _p, _t, text: shown.append(text))
    bad = isolated_dirs / "deep.memplan"
    bad.write_text("[" * 990, encoding="utf-8")
    window = app.start(str(bad))
    qtbot.addWidget(window)
    assert window.isVisible() and window.doc.plan == default_plan()
    assert len(shown) == 1 and "deep.memplan was not opened" in shown[0]
    assert "nests more than 64 levels" in shown[0] and len(shown[0]) < 400


def test_two_instances_keep_each_others_recent_files(tmp_path: Path) -> None:
    from gui.settings import Settings

    first, second = Settings(tmp_path), Settings(tmp_path)
    first.add_recent(str(tmp_path / "a.memplan"))
    second.add_recent(str(tmp_path / "b.memplan"))
    first.set_units("gib")
    assert Settings(tmp_path).recent_files() == [
        str((tmp_path / "b.memplan").resolve()),
        str((tmp_path / "a.memplan").resolve()),
    ]
    assert [p.name for p in tmp_path.iterdir()] == ["settings.json"]
