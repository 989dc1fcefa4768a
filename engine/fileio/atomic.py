"""Write a file whole or not at all, keep what the old one had, and leave no debris.

The bytes go to a temp file in the target's folder, are fsynced and renamed over the
target, so a crash at any moment leaves the old file or the new one, never a mix. What
a ``kill -9`` can leave is the temp file itself; it is named so that MemPlan recognises
its own (``.~memplan-<host>-<pid>-<random>.tmp``, short enough for any file name) and the
next save into that folder removes those whose process is gone. Saving over a file keeps
its permission bits (and group, where allowed); saving over a symlink writes the file it
points to. A save never replaces what is not a regular file — a FIFO, a device node, a
socket, or a symlink to one (issue 33: renaming over ``/dev/…`` or a FIFO someone reads
would swap it for a plain file): :func:`refuse_special` says so instead. Failures are
:class:`~engine.errors.SaveError` with the reason in words.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import re
import secrets
import socket
import stat
import time
from pathlib import Path

from engine.errors import SaveError

TEMP_PREFIX = ".~memplan-"
TEMP_SUFFIX = ".tmp"
TEMP_NAME = re.compile(r"^\.~memplan-([0-9a-f]{4})-(\d+)-[0-9a-f]{8}\.tmp$")
STALE_AFTER_S = 3600.0
"""A temp file this old is debris even if a process with its pid runs (pids are reused,
and a save takes well under a second)."""

DEFAULT_NAME_MAX = 255


def host_tag() -> str:
    """Four hex digits naming this machine, so a folder shared over the network never has
    one machine judge another's in-flight temp file by a pid it cannot see."""
    return hashlib.sha256(socket.gethostname().encode("utf-8", "replace")).hexdigest()[:4]


def temp_name() -> str:
    return f"{TEMP_PREFIX}{host_tag()}-{os.getpid()}-{secrets.token_hex(4)}{TEMP_SUFFIX}"


def pid_alive(pid: int) -> bool:
    """Whether a process with this id runs on this machine (signal 0 probes, sends nothing)."""
    if pid == os.getpid():
        return True
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # it exists, owned by someone else
    except OSError:
        return False
    return True


def is_stale(name: str, age_s: float) -> bool:
    """True for a MemPlan temp file no save is writing any more. Another process's
    in-flight temp file (same machine, process alive, young) is never stale."""
    match = TEMP_NAME.match(name)
    if match is None:
        return False
    if age_s > STALE_AFTER_S:
        return True
    pid = int(match[2])
    return match[1] == host_tag() and pid != os.getpid() and not pid_alive(pid)


def clean_stale_temps(folder: str | os.PathLike[str]) -> int:
    """Remove the stale MemPlan temp files in ``folder`` (only those; see :func:`is_stale`);
    returns how many. Never raises: cleaning is a courtesy, not part of the save."""
    removed = 0
    now = time.time()
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return 0
    for entry in entries:
        if not entry.name.startswith(TEMP_PREFIX):
            continue
        try:
            age = now - entry.stat(follow_symlinks=False).st_mtime
            if is_stale(entry.name, age):
                os.unlink(entry.path)
                removed += 1
        except OSError:
            continue
    return removed


def _name_max(folder: Path) -> int:
    try:
        return int(os.pathconf(folder, "PC_NAME_MAX"))
    except (OSError, ValueError, AttributeError):
        return DEFAULT_NAME_MAX


def reason(exc: OSError, target: Path) -> str:
    """Why ``target`` could not be written, in words a user can act on."""
    folder = target.parent
    code = exc.errno
    if code in (errno.EACCES, errno.EPERM):
        return f"you do not have permission to write in the folder {folder}"
    if code == errno.EROFS:
        return f"the folder {folder} is on a read-only disk"
    if code in (errno.ENOSPC, getattr(errno, "EDQUOT", errno.ENOSPC)):
        return f"the disk holding {folder} is full"
    if code == errno.ENAMETOOLONG:
        return "the file name is too long for this disk"
    if code == errno.ENOENT:
        return f"the folder {folder} does not exist"
    if code == errno.ENOTDIR:
        return f"{folder} is not a folder"
    if code == errno.EISDIR:
        return f"{target} is a folder"
    return exc.strerror or str(exc)


def _check_target(target: Path) -> os.stat_result | None:
    """The existing file's status (None for a new file), or SaveError if it cannot be
    replaced: a folder, a read-only file, a name over the file system's limit."""
    size = len(os.fsencode(target.name))
    limit = _name_max(target.parent) if target.parent.is_dir() else DEFAULT_NAME_MAX
    if size > limit:
        raise SaveError(f"the file name is {size} bytes long; this disk allows at most {limit}")
    try:
        st = os.stat(target)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise SaveError(reason(exc, target)) from exc
    if stat.S_ISDIR(st.st_mode):
        raise SaveError(f"{target} is a folder")
    _refuse_mode(target, st)
    if not os.access(target, os.W_OK):
        raise SaveError(f"{target.name} is read-only; save under another name or make it writable")
    return st


SPECIAL_KINDS = (
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def _refuse_mode(target: Path, st: os.stat_result) -> None:
    if stat.S_ISREG(st.st_mode) or stat.S_ISDIR(st.st_mode):
        return
    kind = next((k for test, k in SPECIAL_KINDS if test(st.st_mode)), "not a regular file")
    raise SaveError(f"{target} is {kind}; MemPlan saves only over regular files")


def refuse_special(path: str | os.PathLike[str]) -> None:
    """Raise SaveError when ``path`` (a symlink followed) exists and is neither a regular
    file nor a folder: for writers that cannot go through :func:`write_atomic` (the PDF
    report, painted by Qt into its own file). Checks only: a new name passes."""
    target = Path(os.path.realpath(path))
    try:
        st = os.stat(target)
    except OSError:
        return  # absent (or unreadable): the write itself says why it fails
    _refuse_mode(target, st)


def _replace(src: str, dst: Path) -> None:
    """Move the finished temp file over the target (a seam for tests)."""
    os.replace(src, dst)


def _keep_mode(fd: int, old: os.stat_result | None) -> None:
    if old is None or not hasattr(os, "fchmod"):
        return  # a new file: the umask already applied to 0o666
    os.fchmod(fd, stat.S_IMODE(old.st_mode))
    with contextlib.suppress(OSError, AttributeError):
        os.fchown(fd, -1, old.st_gid)


def _sync_folder(folder: Path) -> None:
    """Make the rename itself durable (POSIX); harmless where folders cannot be opened."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    with contextlib.suppress(OSError):
        os.fsync(fd)
    os.close(fd)


def write_atomic(data: bytes, path: str | os.PathLike[str]) -> Path:
    """Write ``data`` to ``path`` atomically; returns the file written (a symlink's target).

    Raises SaveError; the previous file is then unchanged and no temp file remains."""
    target = Path(os.path.realpath(path))
    old = _check_target(target)
    clean_stale_temps(target.parent)
    tmp = target.parent / temp_name()
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0)
    try:
        fd = os.open(tmp, flags, 0o666)
    except OSError as exc:
        raise SaveError(reason(exc, target)) from exc
    try:
        try:
            _keep_mode(fd, old)
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        finally:
            os.close(fd)
        _replace(str(tmp), target)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if isinstance(exc, OSError) and not isinstance(exc, SaveError):
            raise SaveError(reason(exc, target)) from exc
        raise
    _sync_folder(target.parent)
    return target
