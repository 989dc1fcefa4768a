"""File → Export Framework Config's result dialog opens large enough to read.

Seen under Xvfb (1366×768 and 1920×1080): the dialog opened at Qt's least size, 300×264,
where the list of what the file cannot express ("• parallelism.strategy: fsdp2 is not
DeepSpeed; written as the equivalent ZeRO stage 3", ~90 characters a line) broke every
line in three and needed scrolling. It now opens at ``RESULT_SIZE`` within the screen.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from PySide6.QtWidgets import QPlainTextEdit


def test_the_export_result_shows_its_lines_whole(
    qtbot: Any, window: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import gui.frameworks.framework_actions as fa

    monkeypatch.setattr(fa, "ask_overwrite", lambda _p, _paths: True)
    assert window.framework.handler.export_to("deepspeed", str(tmp_path / "ds_config.json"))
    result = window.framework.handler.result
    qtbot.waitExposed(result)
    (text,) = result.findChildren(QPlainTextEdit)
    lines = text.toPlainText().splitlines()
    widest = max(text.fontMetrics().horizontalAdvance(line) for line in lines)
    # the default plan's DeepSpeed export lists 'stack.name', the strategy and more; its
    # widest line is one bullet of about 90 characters (old dialog: 300 px for all)
    assert any(line.startswith("• parallelism.strategy") for line in lines)
    assert widest <= text.viewport().width()
    avail = result.screen().availableGeometry()
    assert result.width() <= avail.width() and result.height() <= avail.height()
    result.close()
