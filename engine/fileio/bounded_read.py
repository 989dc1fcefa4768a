"""Read a file someone handed over (a framework config, a model folder's files) with the
plan loader's guarantees: regular files only, never more than a size cap, never through
a path that leaves the folder it was found in.

``open()`` on a FIFO blocks until a writer appears, and ``read()`` of ``/dev/zero`` never
ends; both are refused here from ``fstat`` of a descriptor opened non-blocking, before a
byte is read. The size cap is the ``.memplan`` loader's own (``strict_json.MAX_FILE_BYTES``):
no config or header MemPlan reads comes near it.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from engine.fileio.strict_json import BOM, MAX_FILE_BYTES

MAX_CONFIG_BYTES = MAX_FILE_BYTES // 16
"""The largest framework config or ``config.json`` read (1 MiB; real ones are a few KB).
A plan keeps a config.json whole (``model.hf_config``) and saves it indented, which
makes a list of small numbers about six times longer: a sixteenth of the loader's own
16 MiB keeps the saved plan inside it, and the reading, the plan's validation and the
save-and-reopen proof all take well under a second. (Safetensors headers and index
files, which no plan keeps, may use the loader's full 16 MiB.)"""


class FileRefused(ValueError):
    """A file that is not read: not regular, too large, not UTF-8, outside its folder.
    The message is one sentence naming the file (by its name, never its whole path)."""


def inside(path: Path, root: Path) -> bool:
    """Whether ``path``, links followed, lies in ``root`` (links followed)."""
    try:
        return path.resolve().is_relative_to(root.resolve())
    except (OSError, RuntimeError):  # a link loop
        return False


def read_regular(path: Path, limit: int = MAX_FILE_BYTES, within: Path | None = None) -> bytes:
    """The bytes of ``path``, refusing a non-regular file, one over ``limit`` bytes, or
    (with ``within``) one whose real location is outside that folder."""
    if within is not None and not inside(path, within):
        raise FileRefused(f"{path.name} leads outside {within.name or within}; not read")
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        raise FileRefused(f"cannot read {path.name}: {exc.strerror or exc}") from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise FileRefused(f"{path.name} is not a regular file (a folder, device or pipe)")
        with os.fdopen(os.dup(fd), "rb") as fh:
            data = fh.read(limit + 1)
    except OSError as exc:
        raise FileRefused(f"cannot read {path.name}: {exc.strerror or exc}") from None
    finally:
        os.close(fd)
    if len(data) > limit:
        size = f"{limit // 2**20} MiB" if limit >= 2**20 else f"{limit:,} bytes"
        raise FileRefused(f"{path.name} is over {size}, far larger than any file MemPlan imports")
    return data


def read_text(path: Path, limit: int = MAX_FILE_BYTES, within: Path | None = None) -> str:
    """The UTF-8 text of ``path`` (a byte-order mark dropped), with :func:`read_regular`'s
    refusals and one for bytes that are not UTF-8."""
    raw = read_regular(path, limit, within)
    try:
        return raw.decode("utf-8").removeprefix(BOM)
    except UnicodeDecodeError as exc:
        raise FileRefused(
            f"{path.name} is not UTF-8 text (byte {exc.start:,} is not valid)"
        ) from None
