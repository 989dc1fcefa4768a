"""Per-user settings and state: recent files, window geometry, units, autosave folder.

Stored as small JSON files in the platform's config and state directories
(platformdirs), so nothing depends on Qt's registry/ini backends and tests can point
both at a temporary folder through ``MEMPLAN_CONFIG_DIR`` / ``MEMPLAN_STATE_DIR``.
"""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path
from typing import Any

import platformdirs

APP = "memplan"
MAX_RECENT = 10
UNIT_CHOICES = ("gb", "gib", "both")


def config_dir() -> Path:
    """Where settings.json lives (``MEMPLAN_CONFIG_DIR`` overrides, for tests)."""
    override = os.environ.get("MEMPLAN_CONFIG_DIR")
    return Path(override) if override else Path(platformdirs.user_config_dir(APP))


def state_dir() -> Path:
    """Where autosaves live (``MEMPLAN_STATE_DIR`` overrides, for tests)."""
    override = os.environ.get("MEMPLAN_STATE_DIR")
    return Path(override) if override else Path(platformdirs.user_state_dir(APP))


class Settings:
    """A tiny JSON-backed settings store; every setter writes through at once.

    Writing through keeps the file right even when the app is killed, which is the
    case the recent-files list and crash recovery exist for.
    """

    def __init__(self, directory: Path | None = None) -> None:
        self.path = (directory or config_dir()) / "settings.json"
        self._data: dict[str, Any] = {}
        with contextlib.suppress(OSError, ValueError):
            loaded = json.loads(self.path.read_text(encoding="utf-8"))
            if isinstance(loaded, dict):
                self._data = loaded

    def _write(self) -> None:
        with contextlib.suppress(OSError):
            self.path.parent.mkdir(parents=True, exist_ok=True)
            tmp = self.path.with_suffix(".tmp")
            tmp.write_text(json.dumps(self._data, indent=2), encoding="utf-8")
            os.replace(tmp, self.path)

    # recent files -------------------------------------------------------------
    def recent_files(self) -> list[str]:
        items = self._data.get("recent_files", [])
        return [str(p) for p in items if isinstance(p, str)][:MAX_RECENT]

    def add_recent(self, path: str) -> None:
        full = str(Path(path).resolve())
        items = [p for p in self.recent_files() if p != full]
        self._data["recent_files"] = [full, *items][:MAX_RECENT]
        self._write()

    def clear_recent(self) -> None:
        self._data["recent_files"] = []
        self._write()

    # units --------------------------------------------------------------------
    def units(self) -> str:
        value = self._data.get("units", "both")
        return value if value in UNIT_CHOICES else "both"

    def set_units(self, units: str) -> None:
        if units not in UNIT_CHOICES:
            raise ValueError(f"units must be one of {UNIT_CHOICES}, got {units!r}")
        self._data["units"] = units
        self._write()

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
        self._data[key] = data.hex()
        self._write()
