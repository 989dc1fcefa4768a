"""Autosave to the state directory, and crash recovery on the next start.

Every few seconds a dirty document is written to ``autosave-<pid>.memplan`` with a
sidecar naming the file it belongs to. A clean close removes both; files whose process
is gone are what a crash left behind, and the next start offers to recover them.
"""

from __future__ import annotations

import contextlib
import json
import os
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from PySide6.QtCore import QObject, QTimer

from engine import planfile
from gui.document import PlanDocument
from gui.settings import state_dir

INTERVAL_MS = 5000


@dataclass(frozen=True)
class Orphan:
    """An autosave left by a process that is no longer running."""

    plan_path: Path
    original: str | None
    saved_at: str


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    except OSError:
        return False
    return True


def find_orphans(directory: Path | None = None) -> list[Orphan]:
    """Autosaves of dead processes, newest first."""
    folder = directory or state_dir()
    out = []
    for meta_path in folder.glob("autosave-*.json"):
        try:
            meta = json.loads(meta_path.read_text(encoding="utf-8"))
            pid = int(meta["pid"])
        except (OSError, ValueError, KeyError, TypeError):
            continue
        plan_path = meta_path.with_suffix(".memplan")
        if _alive(pid) or not plan_path.exists():
            continue
        out.append(Orphan(plan_path, meta.get("original"), str(meta.get("saved_at", ""))))
    return sorted(out, key=lambda o: o.saved_at, reverse=True)


def discard(orphan: Orphan) -> None:
    for path in (orphan.plan_path, orphan.plan_path.with_suffix(".json")):
        with contextlib.suppress(OSError):
            path.unlink()


class Autosaver(QObject):
    """Writes the document's unsaved state every few seconds."""

    def __init__(
        self, doc: PlanDocument, directory: Path | None = None, interval_ms: int = INTERVAL_MS
    ) -> None:
        super().__init__(doc)
        self.doc = doc
        self.directory = directory or state_dir()
        stem = f"autosave-{os.getpid()}-{id(doc):x}"
        self.plan_path = self.directory / f"{stem}.memplan"
        self.meta_path = self.directory / f"{stem}.json"
        self._last_index = -1
        self.timer = QTimer(self)
        self.timer.setInterval(interval_ms)
        self.timer.timeout.connect(self.tick)
        self.timer.start()
        doc.dirtyChanged.connect(self._dirty_changed)

    def _dirty_changed(self, dirty: bool) -> None:
        if not dirty:
            self.clear()

    def tick(self) -> bool:
        """Autosave now if there are unsaved edits not yet written; True if written."""
        if not self.doc.dirty:
            return False
        index = self.doc.undo_stack.index()
        if index == self._last_index and self.plan_path.exists():
            return False
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            planfile.save(self.doc.to_planfile(), self.plan_path)
            meta = {
                "pid": os.getpid(),
                "original": str(self.doc.path) if self.doc.path else None,
                "saved_at": datetime.now().isoformat(timespec="seconds"),
            }
            self.meta_path.write_text(json.dumps(meta), encoding="utf-8")
        except OSError:
            return False
        self._last_index = index
        return True

    def clear(self) -> None:
        """Remove this session's autosave (after a save, a revert or a clean close)."""
        self._last_index = -1
        for path in (self.plan_path, self.meta_path):
            with contextlib.suppress(OSError):
                path.unlink()
