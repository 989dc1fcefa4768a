"""Model tab: a preset or an imported Hugging Face config, or every field by hand.

The preset chooser lists the presets at once by name; their exact parameter counts
(each builds the model's whole tensor inventory) are computed by the window's analysis
worker process and added as they arrive (:meth:`ModelTab.show_total`), so neither the
start nor the GUI thread ever waits for them. The chooser follows
the plan: the plan's preset, or "Imported: NAME" / "Edited by hand" when the
architecture came from elsewhere. Applying a preset or an import is one document edit at
once; a large model's first estimate follows off the GUI thread (``gui.document``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from PySide6.QtCore import QTimer
from PySide6.QtWidgets import (
    QComboBox,
    QFileDialog,
    QGroupBox,
    QHBoxLayout,
    QMessageBox,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from engine.models.spec import ArchitectureSpec
from engine.sections.model import ModelSection
from gui.document import PlanDocument
from gui.fields.fields import compact
from gui.fields.preset_hint import PendingPick
from gui.frameworks import model_sources
from gui.tabs.base import TabPage

if TYPE_CHECKING:
    from gui.workers.analysis_worker import AnalysisWorker

COUNTS_DELAY_MS = 400
"""The presets' parameter counts are asked for this long after the window is shown:
after its first paint, so the worker process's start does not compete with it."""


class ModelTab(TabPage):
    """Preset / import row on top, then the name and the architecture fields."""

    def __init__(self, doc: PlanDocument, units: str, parent: QWidget | None = None) -> None:
        super().__init__(doc, units, parent)
        box = QGroupBox("Source", self.widget())
        lay = QVBoxLayout(box)
        row = QHBoxLayout()
        self.preset = QComboBox(box)
        self.preset.setObjectName("modelPreset")
        compact(self.preset)
        self._titles = dict(model_sources.preset_titles())  # key → display name
        for key, name in self._titles.items():
            self.preset.addItem(name, key)
        self.preset.setToolTip(
            "Model presets fill every architecture field below; the plan "
            "stores the numbers, so it never changes when presets do."
        )
        self._select_current_preset()
        doc.planChanged.connect(self._select_current_preset)
        apply_btn = QPushButton("&Apply preset", box)
        apply_btn.clicked.connect(self.apply_preset)
        row.addWidget(self.preset, 1)
        row.addWidget(apply_btn)
        lay.addLayout(row)
        self.pending = PendingPick(self.preset, box, "Apply preset", self._plan_index)
        lay.addWidget(self.pending.label)
        doc.planChanged.connect(self.pending.update)
        row2 = QHBoxLayout()
        self.hf_button = QPushButton("Import c&onfig.json…", box)
        self.hf_button.setToolTip("Read a Hugging Face config.json into the fields below.")
        self.st_button = QPushButton("Import model fol&der…", box)
        self.st_button.setToolTip(
            "Read config.json and cross-check it against the "
            "safetensors headers (the weights are never read)."
        )
        row2.addWidget(self.hf_button)
        row2.addWidget(self.st_button)
        self.hf_button.clicked.connect(lambda: self._import(False))
        self.st_button.clicked.connect(lambda: self._import(True))
        lay.addLayout(row2)
        self.column.addWidget(box)
        self.add_section("Model", ModelSection, "model", include=("name", "preset"))
        self.add_section("Architecture", ArchitectureSpec, "model.architecture")
        self.finish()

    def _plan_index(self) -> int:
        """The chooser's index of the preset the plan holds (−1: imported or edited)."""
        model = self.doc.plan.model
        index = self.preset.findData(model.preset) if model.preset else -1
        if index >= 0 and model_sources.load_preset(model.preset or "")[1] != model.architecture:
            return -1
        return index

    def _select_current_preset(self) -> None:
        """Show the preset the plan came from (the combo is a chooser, not the plan); an
        imported or hand-edited architecture shows as such, never as the old preset."""
        model = self.doc.plan.model
        index = self._plan_index()
        if index < 0 and model.preset and self.preset.findData(model.preset) >= 0:
            self.preset.setPlaceholderText(f"Edited by hand (from {model.name})")
        elif index < 0:
            self.preset.setPlaceholderText(f"Imported: {model.name}")
        if index != self.preset.currentIndex():
            self.preset.setCurrentIndex(index)

    def show_total(self, key: str, total: object) -> None:
        """Add a preset's exact parameter count to its name in the chooser."""
        index = self.preset.findData(key)
        if index >= 0 and isinstance(total, int):
            self.preset.setItemText(index, model_sources.titled(self._titles[key], total))

    def apply_preset(self) -> None:
        key = self.preset.currentData()
        if key is None:  # the chooser shows the imported model: nothing to apply
            return
        name, spec = model_sources.load_preset(key)
        # one undo step; a large model's estimate follows off the GUI thread (document)
        self.doc.set_many(model_sources.model_changes(key, name, spec), f"Model preset {name}")

    def _import(self, folder: bool) -> None:
        if folder:
            path = QFileDialog.getExistingDirectory(self, "Hugging Face model folder")
        else:
            path, _ = QFileDialog.getOpenFileName(
                self, "Hugging Face config.json", "", "config.json (*.json)"
            )
        if path:
            self.import_path(path, folder)

    def import_path(self, path: str, folder: bool) -> bool:
        """Import a config.json or a model folder into the plan (one undo step).

        A folder's safetensors cross-check mismatches are shown but do not block the
        import: the config decides the architecture, the user decides what to trust.
        """
        try:
            got = (model_sources.import_folder if folder else model_sources.import_config)(path)
        except model_sources.IMPORT_ERRORS as exc:
            QMessageBox.warning(self, "Import failed", str(exc))
            return False
        self.doc.set_many(got.changes, f"Import {got.name}")
        if got.notes:
            QMessageBox.information(
                self, f"Imported {got.name}", "\n".join(f"• {n}" for n in got.notes)
            )
        messages = got.messages
        if messages:
            QMessageBox.information(
                self,
                "Checkpoint cross-check",
                "The safetensors headers disagree with config.json:\n\n"
                + "\n".join(f"• {m}" for m in messages),
            )
        return True


def follow_totals(worker: AnalysisWorker, tab: Callable[[], ModelTab]) -> None:
    """Show each preset's parameter count in ``tab()``'s chooser as ``worker`` delivers it."""
    worker.totalReady.connect(lambda key, total: tab().show_total(key, total))


def count_presets_soon(worker: AnalysisWorker) -> None:
    """Ask ``worker``'s process for every preset's count after :data:`COUNTS_DELAY_MS`
    (call it once the window is shown; asking again asks for nothing more)."""
    QTimer.singleShot(
        COUNTS_DELAY_MS, worker, lambda: worker.request_totals(model_sources.preset_keys())
    )
