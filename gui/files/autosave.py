"""Autosave, one file per app instance and window, and finding what crashes left behind.

Every few seconds a window with unsaved edits writes them to
``autosave-<instance>-<pid>-w<window>.memplan`` in the autosave folder (the user data
directory), with a small ``.json`` sidecar naming the file it belongs to. The instance id
is random per start and its lock file (:mod:`gui.files.instance`) says whether the instance
still runs, so two instances never write, offer or delete each other's autosaves.

An autosave is removed only when the plan it protects is safe some other way: saved,
explicitly discarded, undone back to the saved state, closed after the user answered the
unsaved-changes prompt, or recovered into a window that has already written its own
autosave of it. A crash leaves it in place, and the next start offers it
(:mod:`gui.files.recovery`).
"""

from __future__ import annotations

import contextlib
import json
import re
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from PySide6.QtCore import QObject, QTimer, Signal

from engine import planfile
from engine.fileio.atomic import write_atomic
from gui.document import PlanDocument
from gui.files.instance import InstanceLock, is_running, lock_is_stale
from gui.settings import autosave_dir

INTERVAL_MS = 5000

_NAME = re.compile(r"^autosave-([0-9A-Za-z]+)-(\d+)-w(\d+)$")
_LEGACY_NAME = re.compile(r"^autosave-")

_instances: dict[Path, InstanceLock] = {}


def instance_for(folder: Path) -> InstanceLock:
    """This process's instance in ``folder``, locked on first use."""
    lock = _instances.get(folder)
    if lock is None:
        lock = _instances[folder] = InstanceLock(folder)
    lock.acquire()
    return lock


def release_instances() -> None:
    """A clean exit: give up every instance lock this process holds."""
    for lock in _instances.values():
        lock.release()
    _instances.clear()


@dataclass(frozen=True)
class Orphan:
    """An autosave left by an instance that is no longer running."""

    plan_path: Path
    original: str | None
    saved_at: str
    name: str = ""
    size: int = 0
    config_hash: str | None = None
    problem: str | None = None  # why it cannot be read (it can still be discarded)

    @property
    def meta_path(self) -> Path:
        return self.plan_path.with_suffix(".json")


def _meta(path: Path) -> dict[str, Any]:
    with contextlib.suppress(OSError, ValueError, RecursionError):
        meta = json.loads(path.with_suffix(".json").read_text(encoding="utf-8"))
        if isinstance(meta, dict):
            return meta
    return {}


def _owner(plan_path: Path, meta: dict[str, Any]) -> tuple[str | None, int] | None:
    """(instance id, pid) of the autosave's writer; None if the name is not one of ours."""
    match = _NAME.match(plan_path.stem)
    pid = meta.get("pid")
    if match:
        return match[1], pid if isinstance(pid, int) else int(match[2])
    if _LEGACY_NAME.match(plan_path.stem) and isinstance(pid, int):
        return None, pid  # written before instance ids existed
    return None


def _describe(plan_path: Path, meta: dict[str, Any]) -> Orphan:
    original = meta.get("original")
    saved_at = meta.get("saved_at")
    try:
        stat = plan_path.stat()
        size = stat.st_size
        mtime = datetime.fromtimestamp(stat.st_mtime).isoformat(timespec="seconds")
    except OSError:
        size, mtime = 0, ""
    common: dict[str, Any] = {
        "plan_path": plan_path,
        "original": original if isinstance(original, str) else None,
        "saved_at": saved_at if isinstance(saved_at, str) else mtime,
        "size": size,
    }
    try:
        pf = planfile.load(plan_path)
    except planfile.PlanFileError as exc:
        return Orphan(**common, name=str(meta.get("name", "")), problem=str(exc))
    return Orphan(**common, name=pf.name, config_hash=pf.config_hash)


def find_orphans(directory: Path | None = None) -> list[Orphan]:
    """Autosaves of instances that are not running, newest first."""
    folder = directory or autosave_dir()
    out = []
    for plan_path in sorted(folder.glob("autosave-*.memplan")):
        meta = _meta(plan_path)
        owner = _owner(plan_path, meta)
        if owner is None or is_running(folder, *owner):
            continue
        out.append(_describe(plan_path, meta))
    return sorted(out, key=lambda o: o.saved_at, reverse=True)


def discard(orphan: Orphan) -> None:
    """Delete an autosave: only once its plan is saved, recovered or discarded by choice."""
    for path in (orphan.plan_path, orphan.meta_path):
        with contextlib.suppress(OSError):
            path.unlink()


def tidy(directory: Path | None = None) -> None:
    """Remove lock and claim files nobody holds and no autosave needs any more."""
    folder = directory or autosave_dir()
    with contextlib.suppress(OSError):
        needed = {_owner(p, _meta(p)) for p in folder.glob("autosave-*.memplan")}
        instances = {owner[0] for owner in needed if owner}
        for lock in folder.glob("instance-*.lock"):
            if lock.stem.removeprefix("instance-") not in instances and lock_is_stale(lock):
                lock.unlink(missing_ok=True)
        for claim in folder.glob("autosave-*.claim"):
            if not claim.with_suffix(".memplan").exists():
                claim.unlink(missing_ok=True)


class Autosaver(QObject):
    """Writes one window's unsaved state every few seconds; ``failed`` says why not."""

    failed = Signal(str)

    def __init__(
        self, doc: PlanDocument, directory: Path | None = None, interval_ms: int = INTERVAL_MS
    ) -> None:
        super().__init__(doc)
        self.doc = doc
        self.directory = directory or autosave_dir()
        self.instance = instance_for(self.directory)
        stem = f"autosave-{self.instance.id}-{self.instance.pid}-w{self.instance.next_window()}"
        self.plan_path = self.directory / f"{stem}.memplan"
        self.meta_path = self.directory / f"{stem}.json"
        self.error: str | None = None
        self._written: tuple[object, ...] | None = None
        self.timer = QTimer(self)
        self.timer.setInterval(interval_ms)
        self.timer.timeout.connect(self.tick)
        self.timer.start()
        doc.dirtyChanged.connect(self._dirty_changed)

    def _dirty_changed(self, dirty: bool) -> None:
        if not dirty:
            self.clear()

    def _content(self) -> tuple[object, ...]:
        """What an autosave must capture (not the undo index: an undo and a different
        edit reach the same index with different content)."""
        d = self.doc
        records = json.dumps(list(d.measurements), sort_keys=True, default=str)
        return (d.plan.config_hash(), d.name, d.notes, records, str(d.path))

    def tick(self) -> bool:
        """Autosave now if there are unsaved edits not yet written; True if written."""
        self.instance.heartbeat()
        if not self.doc.dirty:
            return False
        content = self._content()
        if content == self._written and self.plan_path.exists():
            return False
        meta = {
            "instance": self.instance.id,
            "pid": self.instance.pid,
            "original": str(self.doc.path) if self.doc.path else None,
            "name": self.doc.name,
            "saved_at": datetime.now().isoformat(timespec="seconds"),
        }
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            planfile.save(self.doc.to_planfile(), self.plan_path)
            write_atomic(json.dumps(meta, ensure_ascii=True).encode("ascii"), self.meta_path)
        except OSError as exc:
            self.error = f"cannot autosave to {self.directory}: {exc.strerror or exc}"
            self.failed.emit(self.error)
            return False
        self.error = None
        self._written = content
        return True

    def clear(self) -> None:
        """Remove this window's autosave (after a save, a revert or a clean close)."""
        self._written = None
        for path in (self.plan_path, self.meta_path):
            with contextlib.suppress(OSError):
                path.unlink()
