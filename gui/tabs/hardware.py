"""Hardware tab: accelerator and node presets, capacities, and the fit policy."""

from __future__ import annotations

from PySide6.QtWidgets import QGridLayout, QGroupBox, QHBoxLayout, QLabel, QPushButton, QWidget

from engine import presets as hardware_presets
from engine.sections.hardware import HardwareSection
from engine.sections.runtime import PolicySection
from engine.sections.workload import AcceptanceSection
from engine.units import fmt_bytes
from gui.document import PlanDocument
from gui.fields.preset_combo import PresetCombo
from gui.fields.preset_hint import PendingPick
from gui.tabs.base import TabPage


class HardwareTab(TabPage):
    def __init__(self, doc: PlanDocument, units: str, parent: QWidget | None = None) -> None:
        super().__init__(doc, units, parent)
        box = QGroupBox("Presets", self.widget())
        grid = QGridLayout(box)
        grid.setColumnStretch(1, 1)
        self.accel = PresetCombo(box)
        self.accel.setObjectName("acceleratorPreset")
        for acc in hardware_presets.accelerators():
            self.accel.addItem(acc.name, acc.key)
            self.accel.setItemData(
                self.accel.count() - 1, f"Usable: {acc.usable_source}", 3
            )  # Qt.ToolTipRole
        self.node = PresetCombo(box)
        self.node.setObjectName("nodePreset")
        for item in hardware_presets.nodes():
            self.node.addItem(item.name, item.key)
            self.node.setItemData(self.node.count() - 1, item.source, 3)
        apply_acc = QPushButton("Apply acce&lerator", box)
        apply_acc.clicked.connect(self.apply_accelerator)
        apply_node = QPushButton("Apply &node", box)
        apply_node.clicked.connect(self.apply_node)
        # The boxes take the row's width and the buttons a row under them: beside
        # the buttons, at 1366×768, a node's name was cut ("NVIDIA DGX H100 (8 × H100").
        grid.addWidget(QLabel("Accelerator", box), 0, 0)
        grid.addWidget(self.accel, 0, 1, 1, 2)
        grid.addWidget(QLabel("Node", box), 1, 0)
        grid.addWidget(self.node, 1, 1, 1, 2)
        buttons = QHBoxLayout()
        buttons.addStretch(1)
        buttons.addWidget(apply_acc)
        buttons.addWidget(apply_node)
        grid.addLayout(buttons, 2, 0, 1, 3)
        self.pending_acc = PendingPick(self.accel, box, "Apply accelerator", self._accel_index)
        self.pending_node = PendingPick(self.node, box, "Apply node", self._node_index)
        grid.addWidget(self.pending_acc.label, 3, 0, 1, 3)
        grid.addWidget(self.pending_node.label, 4, 0, 1, 3)
        self.usable_warning = QLabel("", box)
        self.usable_warning.setObjectName("usableWarning")
        self.usable_warning.setWordWrap(True)
        self.usable_warning.setStyleSheet("color: #b3261e;")
        self.clamp = QPushButton("Set usable HBM to HBM", box)
        self.clamp.clicked.connect(self.clamp_usable)
        grid.addWidget(self.usable_warning, 5, 0, 1, 2)
        grid.addWidget(self.clamp, 5, 2)
        self.column.addWidget(box)
        self.add_section("Accelerator and node", HardwareSection, "hardware")
        self.add_section(
            "Fit policy",
            PolicySection,
            "policy",
            include=("headroom_percent", "rounding", "max_gpus", "max_pp"),
        )
        self.add_section(
            "Acceptance thresholds (validation plan)",
            AcceptanceSection,
            "acceptance",
            collapsed=True,
        )
        doc.planChanged.connect(self._follow_plan)
        doc.planChanged.connect(self.pending_acc.update)
        doc.planChanged.connect(self.pending_node.update)
        self._follow_plan()
        self.finish()

    def _follow_plan(self) -> None:
        """Show the plan's accelerator and node in the preset boxes: the preset whose
        figures the plan holds, else "Custom" (never a stale preset)."""
        hw = self.doc.plan.hardware
        self.accel.setPlaceholderText(f"Custom ({hw.accelerator})")
        self.accel.setCurrentIndex(self._accel_index())
        self.node.setPlaceholderText("Custom node")
        self.node.setCurrentIndex(self._node_index())
        over = hw.usable_hbm_bytes > hw.hbm_bytes
        if over:
            self.usable_warning.setText(
                f"Usable HBM ({fmt_bytes(hw.usable_hbm_bytes)}) is more than the HBM "
                f"({fmt_bytes(hw.hbm_bytes)}): no card exposes more than it has, and the "
                f"verdict compares with usable HBM. Lower it (or raise HBM)."
            )
        self.usable_warning.setHidden(not over)
        self.clamp.setHidden(not over)

    def clamp_usable(self) -> None:
        """Usable HBM down to the HBM (one undoable edit)."""
        hw = self.doc.plan.hardware
        self.doc.set("hardware.usable_hbm_bytes", hw.hbm_bytes, text="Set usable HBM to HBM")

    def _accel_index(self) -> int:
        """The accelerator preset whose figures the plan holds (−1: none)."""
        hw = self.doc.plan.hardware
        index = self.accel.findData(hw.accelerator)
        if index >= 0:
            acc = hardware_presets.accelerator(hw.accelerator)
            if (acc.hbm_bytes, acc.usable_hbm_bytes) != (hw.hbm_bytes, hw.usable_hbm_bytes):
                return -1
        return index

    def _node_index(self) -> int:
        """The node preset whose every stated figure the plan holds (−1: none)."""
        hw = self.doc.plan.hardware
        for i, item in enumerate(hardware_presets.nodes()):
            figures = (
                (item.gpus_per_node, hw.gpus_per_node),
                (item.host_ram_bytes_per_node, hw.host_ram_bytes_per_node),
                (item.nvme_bytes_per_node, hw.nvme_bytes_per_node),
                (item.accelerator, hw.accelerator),
            )
            if all(want is None or want == have for want, have in figures):
                return i
        return -1

    def apply_accelerator(self) -> None:
        key = self.accel.currentData()
        if key is None:
            return
        self.doc.set_many(
            hardware_presets.accelerator_changes(key), f"Accelerator {self.accel.currentText()}"
        )

    def apply_node(self) -> None:
        key = self.node.currentData()
        if key is None:
            return
        self.doc.set_many(hardware_presets.node_changes(key), f"Node {self.node.currentText()}")
