"""Model tab: a preset or an imported Hugging Face config, or every field by hand."""

from __future__ import annotations

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
from gui import model_sources
from gui.document import PlanDocument
from gui.fields import compact
from gui.tabs.base import TabPage


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
        for key, name in model_sources.list_presets():
            self.preset.addItem(name, key)
        self.preset.setToolTip(
            "Model presets fill every architecture field below; the plan "
            "stores the numbers, so it never changes when presets do."
        )
        self._select_current_preset()
        doc.planChanged.connect(self._select_current_preset)
        apply_btn = QPushButton("Apply preset", box)
        apply_btn.clicked.connect(self.apply_preset)
        row.addWidget(self.preset, 1)
        row.addWidget(apply_btn)
        lay.addLayout(row)
        row2 = QHBoxLayout()
        self.hf_button = QPushButton("Import config.json…", box)
        self.hf_button.setToolTip("Read a Hugging Face config.json into the fields below.")
        self.st_button = QPushButton("Import model folder…", box)
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

    def _select_current_preset(self) -> None:
        """Show the preset the plan came from (the combo is a chooser, not the plan)."""
        index = self.preset.findData(self.doc.plan.model.preset)
        if index >= 0 and index != self.preset.currentIndex():
            self.preset.setCurrentIndex(index)

    def apply_preset(self) -> None:
        key = self.preset.currentData()
        name, spec = model_sources.load_preset(key)
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
        messages = got.messages
        if messages:
            QMessageBox.information(
                self,
                "Checkpoint cross-check",
                "The safetensors headers disagree with config.json:\n\n"
                + "\n".join(f"• {m}" for m in messages),
            )
        return True
