"""Hardware tab: accelerator and node presets, capacities, and the fit policy."""

from __future__ import annotations

from PySide6.QtWidgets import QComboBox, QGridLayout, QGroupBox, QLabel, QPushButton, QWidget

from engine import presets as hardware_presets
from engine.sections.hardware import HardwareSection
from engine.sections.runtime import PolicySection
from gui.document import PlanDocument
from gui.fields import compact
from gui.tabs.base import TabPage


class HardwareTab(TabPage):
    def __init__(self, doc: PlanDocument, units: str, parent: QWidget | None = None) -> None:
        super().__init__(doc, units, parent)
        box = QGroupBox("Presets", self.widget())
        grid = QGridLayout(box)
        grid.setColumnStretch(1, 1)
        self.accel = QComboBox(box)
        self.accel.setObjectName("acceleratorPreset")
        compact(self.accel)
        for acc in hardware_presets.accelerators():
            self.accel.addItem(acc.name, acc.key)
            self.accel.setItemData(
                self.accel.count() - 1, f"Usable: {acc.usable_source}", 3
            )  # Qt.ToolTipRole
        self.node = QComboBox(box)
        self.node.setObjectName("nodePreset")
        compact(self.node)
        for item in hardware_presets.nodes():
            self.node.addItem(item.name, item.key)
            self.node.setItemData(self.node.count() - 1, item.source, 3)
        apply_acc = QPushButton("Apply", box)
        apply_acc.clicked.connect(self.apply_accelerator)
        apply_node = QPushButton("Apply", box)
        apply_node.clicked.connect(self.apply_node)
        grid.addWidget(QLabel("Accelerator", box), 0, 0)
        grid.addWidget(self.accel, 0, 1)
        grid.addWidget(apply_acc, 0, 2)
        grid.addWidget(QLabel("Node", box), 1, 0)
        grid.addWidget(self.node, 1, 1)
        grid.addWidget(apply_node, 1, 2)
        self.column.addWidget(box)
        self.add_section("Accelerator and node", HardwareSection, "hardware")
        self.add_section(
            "Fit policy",
            PolicySection,
            "policy",
            include=("headroom_percent", "rounding", "max_gpus"),
        )
        doc.planChanged.connect(self._follow_plan)
        self._follow_plan()
        self.finish()

    def _follow_plan(self) -> None:
        """Show the plan's accelerator in the preset box when it is a known preset."""
        index = self.accel.findData(self.doc.plan.hardware.accelerator)
        if index >= 0:
            self.accel.setCurrentIndex(index)

    def apply_accelerator(self) -> None:
        key = self.accel.currentData()
        self.doc.set_many(
            hardware_presets.accelerator_changes(key), f"Accelerator {self.accel.currentText()}"
        )

    def apply_node(self) -> None:
        key = self.node.currentData()
        self.doc.set_many(hardware_presets.node_changes(key), f"Node {self.node.currentText()}")
