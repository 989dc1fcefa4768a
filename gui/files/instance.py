"""Which app instances are running: a lock file per instance, and claims on orphans.

Each running app holds an exclusive ``flock`` on ``instance-<id>.lock`` in the autosave
folder for as long as it lives. The kernel drops the lock when the process dies, however
it dies, so "is that instance running?" is "is its lock still held?" — immune to pid
reuse, which a pid check alone is not. Where ``fcntl`` is missing (Windows) the lock
file's mtime is a heartbeat instead, touched on every autosave tick.

Recovering another instance's autosave first *claims* it (an exclusive lock on
``<autosave>.claim``), so two instances starting together never both offer, or both
delete, the same file.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import time
from pathlib import Path
from typing import IO

from engine.fileio.atomic import pid_alive

try:
    import fcntl
except ImportError:  # Windows: heartbeat only
    fcntl = None  # type: ignore[assignment]

HEARTBEAT_STALE_S = 600.0
"""Without ``fcntl``: an instance whose heartbeat is older than this is gone."""


def _try_lock(fh: IO[bytes]) -> bool:
    if fcntl is None:
        return True
    try:
        fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return False
    return True


def lock_path(folder: Path, instance: str) -> Path:
    return folder / f"instance-{instance}.lock"


class InstanceLock:
    """This process's identity in an autosave folder, held until :meth:`release`."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.id = secrets.token_hex(6)
        self.pid = os.getpid()
        self.path = lock_path(folder, self.id)
        self._fh: IO[bytes] | None = None
        self._window = 0

    def acquire(self) -> bool:
        """Create and lock the file; False (and autosave still works, without the pid
        reuse guard) when the folder cannot hold it."""
        for _attempt in range(3):
            if self._fh is not None and self._still_ours():
                return True
            self.release()
            try:
                self.folder.mkdir(parents=True, exist_ok=True)
                fh = open(self.path, "a+b")  # noqa: SIM115 - held open for the process's life
            except OSError:
                return False
            if not _try_lock(fh):
                fh.close()
                return False
            with contextlib.suppress(OSError):
                fh.truncate(0)
                fh.write(json.dumps({"pid": self.pid, "started": time.time()}).encode("utf-8"))
                fh.flush()
            self._fh = fh
        return self._still_ours()

    def _still_ours(self) -> bool:
        """Whether the file at our path is the one we locked (a tidy-up by another
        instance may have removed it between our open and our lock)."""
        if self._fh is None:
            return False
        try:
            return os.stat(self.path).st_ino == os.fstat(self._fh.fileno()).st_ino
        except OSError:
            return False

    def next_window(self) -> int:
        """A number for the next window's autosave, unique within this instance."""
        self._window += 1
        return self._window

    def heartbeat(self) -> None:
        """Touch the lock file (the liveness sign where ``fcntl`` is missing), and take a
        new one if ours was removed."""
        if not self.acquire():
            return
        with contextlib.suppress(OSError):
            os.utime(self.path)

    def release(self) -> None:
        """Give up the lock and remove the file if it is still ours (a clean exit)."""
        if self._fh is None:
            return
        if self._still_ours():
            with contextlib.suppress(OSError):
                self.path.unlink()
        self._fh.close()
        self._fh = None


def lock_is_stale(path: Path) -> bool:
    """True when no running instance holds this lock file."""
    if fcntl is None:
        try:
            return time.time() - path.stat().st_mtime >= HEARTBEAT_STALE_S
        except OSError:
            return True
    try:
        with open(path, "rb") as fh:
            if not _try_lock(fh):
                return False
            fcntl.flock(fh.fileno(), fcntl.LOCK_UN)
            return True
    except OSError:
        return True


def is_running(folder: Path, instance: str | None, pid: int) -> bool:
    """Whether the instance that wrote an autosave still runs. A dead pid settles it; a
    live pid counts only while the instance's lock is held (or, without ``fcntl``, while
    its heartbeat is fresh), since the pid may have been reused."""
    if not pid_alive(pid):
        return False
    if instance is None:
        return True  # an autosave from before instance locks: the pid is all there is
    path = lock_path(folder, instance)
    return path.exists() and not lock_is_stale(path)


class Claim:
    """An exclusive hold on one orphaned autosave while this instance decides about it."""

    def __init__(self, autosave: Path) -> None:
        self.path = autosave.with_suffix(".claim")
        self._fh: IO[bytes] | None = None

    def take(self) -> bool:
        try:
            fh = open(self.path, "a+b")  # noqa: SIM115 - held until release()
        except OSError:
            return True  # a read-only folder: nothing can delete the autosave either
        if not _try_lock(fh):
            fh.close()
            return False
        self._fh = fh
        return True

    def release(self, remove: bool) -> None:
        """Let go; ``remove`` once the autosave itself is gone."""
        if remove:
            with contextlib.suppress(OSError):
                self.path.unlink()
        if self._fh is not None:
            self._fh.close()
            self._fh = None
