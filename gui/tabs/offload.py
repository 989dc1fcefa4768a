"""Offload tab: what moves to host RAM or NVMe, host consumers and checkpoints."""

from __future__ import annotations

from PySide6.QtWidgets import QWidget

from engine.sections.offload import CheckpointSection, HostSection, OffloadSection
from gui.document import PlanDocument
from gui.tabs.base import TabPage


class OffloadTab(TabPage):
    def __init__(self, doc: PlanDocument, units: str, parent: QWidget | None = None) -> None:
        super().__init__(doc, units, parent)
        self.add_section(
            "Offload placement",
            OffloadSection,
            "offload",
            include=("optimizer", "params", "pin_memory", "step_time_target_s"),
        )
        self.add_section(
            "Offload buffers (DeepSpeed)",
            OffloadSection,
            "offload",
            exclude=("optimizer", "params", "pin_memory", "step_time_target_s"),
            collapsed=True,
        )
        self.add_section("Host RAM consumers", HostSection, "host")
        self.add_section("Checkpoints", CheckpointSection, "checkpoint")
        self.finish()
