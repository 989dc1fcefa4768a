"""File → Import Framework Config…, Import Model Folder… and the Export Framework Config
submenu, present from the window's start; what they do (:mod:`gui.frameworks.framework_actions`,
and with it ``engine.exports``, tens of milliseconds of imports) is loaded the first time
one is triggered or :attr:`FrameworkMenu.handler` is asked for."""

from __future__ import annotations

from typing import TYPE_CHECKING

from PySide6.QtGui import QAction
from PySide6.QtWidgets import QMenu, QWidget

from gui.document import PlanDocument

if TYPE_CHECKING:
    from gui.frameworks.framework_actions import FrameworkActions

FORMAT_NAMES = {
    "deepspeed": "&DeepSpeed ds_config.json…",
    "accelerate": "&accelerate config…",
    "torchtitan": "&torchtitan recipe…",
    "megatron": "&Megatron-LM launch script…",
}
"""Export format key (``engine.exports.FORMATS``) → its entry in the submenu."""


class FrameworkMenu:
    """The export submenu and the import actions of one window."""

    def __init__(self, window: QWidget, doc: PlanDocument) -> None:
        self.window, self.doc = window, doc
        self._handler: FrameworkActions | None = None
        self.export_menu = QMenu("Export &Framework Config", window)
        self.exports: dict[str, QAction] = {}
        for key, text in FORMAT_NAMES.items():
            action = self.export_menu.addAction(text)
            action.triggered.connect(lambda _c=False, k=key: self.handler.export_dialog(k))
            self.exports[key] = action
        self.import_action = QAction("&Import Framework Config…", window)
        self.import_action.setStatusTip(
            "Read a ds_config, accelerate YAML, torchtitan config, Megatron arguments or "
            "a config.json into the plan"
        )
        self.import_action.triggered.connect(lambda _c=False: self.handler.import_dialog())
        self.import_folder_action = QAction("Import &Model Folder…", window)
        self.import_folder_action.setStatusTip("A folder with config.json and/or safetensors")
        self.import_folder_action.triggered.connect(
            lambda _c=False: self.handler.import_folder_dialog()
        )

    @property
    def handler(self) -> FrameworkActions:
        """The exports and imports themselves, loaded on first use."""
        if self._handler is None:
            from gui.frameworks.framework_actions import FrameworkActions

            self._handler = FrameworkActions(self.window, self.doc)
        return self._handler
