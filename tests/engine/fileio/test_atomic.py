"""Atomic writes: the old file or the new one, its mode and symlink kept, no debris, and
every failure one sentence a user can act on."""

from __future__ import annotations

import errno
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from engine.errors import SaveError
from engine.fileio import atomic
from engine.fileio.atomic import (
    TEMP_NAME,
    clean_stale_temps,
    host_tag,
    is_stale,
    temp_name,
    write_atomic,
)


@pytest.fixture
def dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_temp_names_are_recognisable_and_short() -> None:
    name = temp_name()
    assert TEMP_NAME.match(name) and len(name) < 40
    assert temp_name() != name


def test_write_replaces_and_leaves_nothing_else(tmp_path: Path) -> None:
    target = tmp_path / "p.memplan"
    write_atomic(b"old", target)
    write_atomic(b"new", target)
    assert target.read_bytes() == b"new"
    assert [p.name for p in tmp_path.iterdir()] == ["p.memplan"]


@pytest.mark.parametrize("mode", [0o644, 0o640, 0o600, 0o664])
def test_saving_over_a_file_keeps_its_mode(tmp_path: Path, mode: int) -> None:
    target = tmp_path / "shared.memplan"
    target.write_bytes(b"old")
    target.chmod(mode)
    write_atomic(b"new", target)
    assert target.stat().st_mode & 0o7777 == mode


def test_a_new_file_gets_the_umask_default(tmp_path: Path) -> None:
    old = os.umask(0o022)
    try:
        write_atomic(b"x", tmp_path / "fresh.memplan")
    finally:
        os.umask(old)
    assert (tmp_path / "fresh.memplan").stat().st_mode & 0o777 == 0o644


def test_saving_over_a_symlink_writes_its_target(tmp_path: Path) -> None:
    real = tmp_path / "store" / "real.memplan"
    real.parent.mkdir()
    real.write_bytes(b"old")
    link = tmp_path / "p.memplan"
    link.symlink_to(real)
    written = write_atomic(b"new", link)
    assert link.is_symlink() and written == real.resolve()
    assert real.read_bytes() == b"new" and link.read_bytes() == b"new"


def test_a_250_byte_name_saves_and_a_300_byte_one_is_refused(tmp_path: Path) -> None:
    long = tmp_path / ("é" * 121 + ".memplan")  # 242 + 8 = 250 bytes
    assert len(os.fsencode(long.name)) == 250
    write_atomic(b"x", long)
    assert long.read_bytes() == b"x"
    with pytest.raises(SaveError, match="file name is 300 bytes long; this disk allows at most"):
        write_atomic(b"x", tmp_path / ("a" * 292 + ".memplan"))


@pytest.mark.parametrize(
    ("code", "words"),
    [
        (errno.EACCES, "you do not have permission to write in the folder"),
        (errno.EROFS, "is on a read-only disk"),
        (errno.ENOSPC, "is full"),
    ],
)
def test_unwritable_places_are_named_in_one_sentence(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, code: int, words: str
) -> None:
    """Permission bits do not stop root (these tests may run as root), so the refusal
    the OS would give is simulated at ``os.open``."""

    def refuse(*_a: object, **_k: object) -> int:
        raise OSError(code, os.strerror(code))

    monkeypatch.setattr(atomic.os, "open", refuse)
    with pytest.raises(SaveError) as info:
        write_atomic(b"x", tmp_path / "p.memplan")
    assert words in str(info.value) and info.value.strerror == str(info.value)


def test_a_read_only_file_is_not_replaced(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "frozen.memplan"
    target.write_bytes(b"old")
    monkeypatch.setattr(atomic.os, "access", lambda *_a: False)
    with pytest.raises(SaveError, match="frozen.memplan is read-only; save under another name"):
        write_atomic(b"new", target)
    assert target.read_bytes() == b"old"


def test_missing_folder_and_folder_target(tmp_path: Path) -> None:
    with pytest.raises(SaveError, match="does not exist"):
        write_atomic(b"x", tmp_path / "nowhere" / "p.memplan")
    with pytest.raises(SaveError, match="is a folder"):
        write_atomic(b"x", tmp_path)


def _age(path: Path, seconds: float) -> None:
    then = time.time() - seconds
    os.utime(path, (then, then))


def test_stale_temps_of_dead_processes_are_cleaned_on_the_next_save(
    tmp_path: Path, dead_pid: int
) -> None:
    host = host_tag()
    dead = tmp_path / f".~memplan-{host}-{dead_pid}-0123abcd.tmp"
    live = tmp_path / f".~memplan-{host}-{os.getppid()}-0123abcd.tmp"  # in flight elsewhere
    old_live = tmp_path / f".~memplan-{host}-{os.getppid()}-89abcdef.tmp"
    other_host = (
        tmp_path / f".~memplan-{'0000' if host != '0000' else '1111'}-{dead_pid}-0123abcd.tmp"
    )
    foreign = tmp_path / ".report.tmp"
    for p in (dead, live, old_live, other_host, foreign):
        p.write_bytes(b"partial")
    _age(old_live, 2 * 3600)
    write_atomic(b"x", tmp_path / "p.memplan")
    left = sorted(p.name for p in tmp_path.iterdir())
    assert left == sorted([live.name, other_host.name, foreign.name, "p.memplan"])


def test_is_stale_only_for_our_pattern(dead_pid: int) -> None:
    assert not is_stale(f".p.memplan.{dead_pid}.tmp", 1e9)
    assert is_stale(f".~memplan-{host_tag()}-{dead_pid}-0123abcd.tmp", 0)
    assert not is_stale(f".~memplan-{host_tag()}-{os.getpid()}-0123abcd.tmp", 10)


def test_cleaning_an_unreadable_folder_does_not_raise(tmp_path: Path) -> None:
    assert clean_stale_temps(tmp_path / "absent") == 0
