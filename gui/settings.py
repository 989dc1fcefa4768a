"""Per-user settings and state: recent files, window geometry, units, autosave folder.

Settings are a small JSON file in the platform's config directory and autosaves live in
its user data directory (platformdirs), so nothing depends on Qt's registry/ini backends
and tests can point both at a temporary folder through ``MEMPLAN_CONFIG_DIR`` /
``MEMPLAN_STATE_DIR``. Several app instances may run at once: each write re-reads the
file and replaces it atomically, so none loses another's recent files.
"""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path
from typing import Any

import platformdirs

from engine.fileio.atomic import write_atomic

APP = "memplan"
MAX_RECENT = 10
UNIT_CHOICES = ("gb", "gib", "both")


def config_dir() -> Path:
    """Where settings.json lives (``MEMPLAN_CONFIG_DIR`` overrides, for tests)."""
    override = os.environ.get("MEMPLAN_CONFIG_DIR")
    return Path(override) if override else Path(platformdirs.user_config_dir(APP))


def autosave_dir() -> Path:
    """Where autosaves live: the user data folder, which survives reboots and is never
    cleaned as a cache would be (``MEMPLAN_STATE_DIR`` overrides, for tests)."""
    override = os.environ.get("MEMPLAN_STATE_DIR")
    return Path(override) if override else Path(platformdirs.user_data_dir(APP)) / "autosave"


class Settings:
    """A tiny JSON-backed settings store; every setter writes through at once.

    Writing through keeps the file right even when the app is killed, which is the
    case the recent-files list and crash recovery exist for.
    """

    def __init__(self, directory: Path | None = None) -> None:
        self.path = (directory or config_dir()) / "settings.json"
        self._data: dict[str, Any] = {}
        self._reload()

    def _reload(self) -> None:
        """Pick up what another instance wrote (a damaged file counts as empty)."""
        with contextlib.suppress(OSError, ValueError, RecursionError):
            loaded = json.loads(self.path.read_text(encoding="utf-8"))
            if isinstance(loaded, dict):
                self._data = loaded

    def _update(self, key: str, value: Any) -> None:
        self._reload()
        self._data[key] = value
        with contextlib.suppress(OSError):
            self.path.parent.mkdir(parents=True, exist_ok=True)
            write_atomic(json.dumps(self._data, indent=2).encode("utf-8"), self.path)

    # recent files -------------------------------------------------------------
    def recent_files(self) -> list[str]:
        items = self._data.get("recent_files", [])
        return [str(p) for p in items if isinstance(p, str)][:MAX_RECENT]

    def add_recent(self, path: str) -> None:
        full = str(Path(path).resolve())
        self._reload()
        items = [p for p in self.recent_files() if p != full]
        self._update("recent_files", [full, *items][:MAX_RECENT])

    def clear_recent(self) -> None:
        self._update("recent_files", [])

    # units --------------------------------------------------------------------
    def units(self) -> str:
        value = self._data.get("units", "both")
        return value if value in UNIT_CHOICES else "both"

    def set_units(self, units: str) -> None:
        if units not in UNIT_CHOICES:
            raise ValueError(f"units must be one of {UNIT_CHOICES}, got {units!r}")
        self._update("units", units)

    # window state (opaque Qt byte strings, stored as hex) ---------------------
    def blob(self, key: str) -> bytes | None:
        value = self._data.get(key)
        if not isinstance(value, str):
            return None
        try:
            return bytes.fromhex(value)
        except ValueError:
            return None

    def set_blob(self, key: str, data: bytes) -> None:
        self._update(key, data.hex())
