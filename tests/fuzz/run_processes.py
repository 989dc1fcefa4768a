"""Real processes killed with SIGKILL: during a save, and app instances with unsaved work.

``run_kills``: a child saves a multi-MB plan in a loop and is killed at a random moment;
the file must then load as the old or the new content (never a mix, never missing), and
the next save must leave no temp file behind. ``run_recovery``: two app instances with
unsaved edits are killed together; a third recovers both and is killed at once; both
plans must still be on disk, in the third instance's autosaves.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

from engine import planfile
from engine.errors import PlanFileError
from engine.fileio.atomic import TEMP_PREFIX
from engine.plan import default_plan, with_value
from gui.files.autosave import discard, find_orphans
from tests.fuzz.tally import Tally

ROOT = Path(__file__).resolve().parents[2]
KILL_RECORDS = 3000
"""Measured records in the killed child's plan: a 2.8 MB file, a save of ~0.1 s."""
START_TIMEOUT_S = 120.0


def _child(args: list[str], env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", *args],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env={**os.environ, **(env or {})},
    )


def _wait_line(proc: subprocess.Popen[bytes]) -> str:
    """The child's first line (it prints one when ready); empty if it died first."""
    assert proc.stdout is not None
    return proc.stdout.readline().decode("utf-8", "replace").strip()


def _kill(proc: subprocess.Popen[bytes]) -> None:
    proc.send_signal(signal.SIGKILL)
    proc.wait()


def _debris(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.startswith(TEMP_PREFIX))


def kill_case(folder: Path, rng: random.Random, case: str, tally: Tally) -> None:
    target = folder / "killed.memplan"
    proc = _child(["tests.fuzz.save_child", str(target), str(KILL_RECORDS)])
    try:
        if _wait_line(proc) != "ready":
            tally.crash(case, RuntimeError("the saving child did not start"))
            return
        time.sleep(rng.uniform(0.0, 0.4))
    finally:
        _kill(proc)
    left = _debris(folder)
    tally.outcomes["killed with a temp file left" if left else "killed between saves"] += 1
    try:
        pf = planfile.load(target)
    except PlanFileError as exc:
        tally.lose(case, f"the file did not survive the kill: {exc}")
        return
    if not pf.name.startswith("kill-") or len(pf.measurements) != KILL_RECORDS:
        tally.lose(case, f"the file holds neither the old nor the new plan ({pf.name!r})")
    planfile.save(pf, target)  # the next save cleans what the kill left
    if _debris(folder):
        tally.lose(case, f"temp files survive the next save: {_debris(folder)}")


def run_kills(count: int, seed: int, folder: Path) -> Tally:
    tally = Tally("kills during save")
    rng = random.Random(seed)
    folder.mkdir(parents=True, exist_ok=True)
    for i in range(count):
        case = f"kill seed={seed} case={i}"
        with tally.case(case):
            kill_case(folder, rng, case, tally)
    return tally


def _app(mode: str, folder: Path, seq_len: int = 0) -> subprocess.Popen[bytes]:
    env = {
        "MEMPLAN_STATE_DIR": str(folder / "autosave"),
        "MEMPLAN_CONFIG_DIR": str(folder / "config"),
        "QT_QPA_PLATFORM": "offscreen",
    }
    return _child(["tests.fuzz.app_child", mode, str(seq_len)], env)


def _on_disk(autosaves: Path) -> set[str]:
    out = set()
    for path in autosaves.glob("autosave-*.memplan"):
        try:
            out.add(planfile.load(path).config_hash)
        except PlanFileError:
            continue
    return out


def recovery_case(folder: Path, seq_lens: tuple[int, int], case: str, tally: Tally) -> None:
    """Two instances crash together; a third recovers both and crashes at once."""
    wanted = {with_value(default_plan(), "batch.seq_len", s).config_hash() for s in seq_lens}
    editors = [_app("edit", folder, s) for s in seq_lens]
    try:
        lines = [_wait_line(p) for p in editors]
    finally:
        for p in editors:
            _kill(p)
    if lines != ["autosaved", "autosaved"]:
        tally.crash(case, RuntimeError(f"the editing instances said {lines}"))
        return
    recoverer = _app("recover", folder)
    try:
        said = _wait_line(recoverer)
    finally:
        _kill(recoverer)  # the second crash, right after recovery
    tally.outcomes[said or "recoverer died"] += 1
    missing = wanted - _on_disk(folder / "autosave")
    if said != "recovered 2" or missing:
        tally.lose(case, f"after recovery ({said!r}) {len(missing)} of 2 plans are gone")
    orphans = find_orphans(folder / "autosave")
    if {o.config_hash for o in orphans} != wanted:
        tally.lose(case, f"the next start would offer {len(orphans)} plans, not both")
    for orphan in orphans:
        discard(orphan)


def run_recovery(rounds: int, seed: int, folder: Path) -> Tally:
    tally = Tally("crash recovery")
    rng = random.Random(seed)
    folder.mkdir(parents=True, exist_ok=True)
    for i in range(rounds):
        seq_lens = (rng.randint(128, 4000), rng.randint(4001, 8000))
        case = f"recovery seed={seed} round={i}"
        with tally.case(case):
            recovery_case(folder, seq_lens, case, tally)
    return tally
