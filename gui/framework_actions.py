"""File → Export Framework Config and File → Import Framework Config…

The engine writes the plan as a DeepSpeed ``ds_config.json``, an FSDP2 setup, an
``accelerate`` config or Megatron arguments (``engine.exports``), and reads a
``ds_config.json`` or an ``accelerate`` YAML back into plan changes
(``engine.exports.importers``: only what the file really states; ``"auto"`` values and
keys MemPlan does not model are reported, never guessed). These actions put both in the
window (they were on the command line only): an export goes to a file the user names,
with what the format could not say shown afterwards; an import is one undo step, with
its notes shown.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from PySide6.QtGui import QAction
from PySide6.QtWidgets import QFileDialog, QMenu, QWidget

from engine.errors import PlanError
from engine.exports import EXPORTERS
from engine.exports.importers import accelerate_changes, deepspeed_changes, read_flat_yaml
from gui import dialogs
from gui.document import PlanDocument

FORMAT_NAMES = {
    "deepspeed": "&DeepSpeed ds_config.json…",
    "fsdp2": "&FSDP2 (torch.distributed) settings…",
    "accelerate": "&Accelerate config…",
    "megatron": "&Megatron-Core arguments…",
}


def import_changes(path: Path, text: str, doc: PlanDocument) -> tuple[dict[str, Any], list[str]]:
    """The plan changes a framework config states: a ``.json`` is read as a DeepSpeed
    config, anything else as an accelerate YAML. Raises ValueError for unreadable text."""
    if path.suffix.lower() == ".json":
        try:
            cfg = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ValueError(f"{path.name} is not valid JSON: {exc.msg}") from None
        if not isinstance(cfg, dict):
            raise ValueError(f"{path.name}: a ds_config.json holds one JSON object")
        return deepspeed_changes(cfg, doc.plan)
    return accelerate_changes(read_flat_yaml(text), doc.plan)


class FrameworkActions:
    """The export submenu and the import action for one window."""

    def __init__(self, window: QWidget, doc: PlanDocument) -> None:
        self.window, self.doc = window, doc
        self.export_menu = QMenu("Export &Framework Config", window)
        self.exports: dict[str, QAction] = {}
        for key, text in FORMAT_NAMES.items():
            action = self.export_menu.addAction(text)
            action.triggered.connect(lambda _c=False, k=key: self.export_dialog(k))
            self.exports[key] = action
        self.import_action = QAction("&Import Framework Config…", window)
        self.import_action.setStatusTip("Read a ds_config.json or an accelerate YAML into the plan")
        self.import_action.triggered.connect(lambda _c=False: self.import_dialog())

    def export_dialog(self, key: str) -> bool:
        try:
            export = EXPORTERS[key](self.doc.plan)
        except (PlanError, ValueError) as exc:
            dialogs.show_error(self.window, "Cannot export", str(exc))
            return False
        start = self.doc.path.parent if self.doc.path else Path.home()
        path, _ = QFileDialog.getSaveFileName(
            self.window, "Export framework config", str(start / export.filename)
        )
        return bool(path) and self.export_to(key, path)

    def export_to(self, key: str, path: str) -> bool:
        """Write the ``key`` export of the plan to ``path``; its notes are shown."""
        try:
            export = EXPORTERS[key](self.doc.plan)
            Path(path).write_text(export.text, encoding="utf-8")
        except (PlanError, ValueError, OSError) as exc:
            dialogs.show_error(self.window, "Cannot export", f"{path}: {exc}")
            return False
        if export.notes:
            dialogs.show_info(
                self.window,
                "Exported — what the config cannot say",
                "\n".join(f"• {n}" for n in export.notes),
            )
        return True

    def import_dialog(self) -> bool:
        start = str(self.doc.path.parent if self.doc.path else Path.home())
        path, _ = QFileDialog.getOpenFileName(
            self.window,
            "Import framework config",
            start,
            "Framework configs (*.json *.yaml *.yml);;All files (*)",
        )
        return bool(path) and self.import_path(path)

    def import_path(self, path: str) -> bool:
        """Apply a framework config to the plan as one undo step; notes are shown."""
        p = Path(path)
        try:
            changes, notes = import_changes(p, p.read_text(encoding="utf-8"), self.doc)
        except (ValueError, OSError) as exc:
            dialogs.show_error(self.window, "Cannot import", str(exc))
            return False
        if not self.doc.set_many(changes, f"Import {p.name}"):
            problems = "; ".join(self.doc.invalid.values()) or "the plan refuses these values"
            dialogs.show_error(self.window, "Cannot import", f"{p.name}: {problems}")
            return False
        if notes:
            dialogs.show_info(self.window, f"Imported {p.name}", "\n".join(f"• {n}" for n in notes))
        return True
