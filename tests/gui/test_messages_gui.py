"""The window's fields word a bad number as ``--set`` does, and read ``8k`` and
``8,192`` as it does (issue 38: one sentence for one bad value on every path)."""

from __future__ import annotations

from typing import Any

import pytest
from PySide6.QtCore import Qt

from engine.cli.common import CliError, apply_sets
from engine.plan import default_plan
from tests.gui.test_field_commits import retype

SEQ = "batch.seq_len"


def _binding(win: Any, path: str) -> Any:
    return next(p.bindings[path] for p in win.tabs.values() if path in p.bindings)


def _cli_message(value: str) -> str:
    with pytest.raises(CliError) as info:
        apply_sets(default_plan(), [f"{SEQ}={value}"])
    return str(info.value).removeprefix("plan.")  # the CLI names the file's section


@pytest.mark.parametrize("bad", ["abc", "1e15", "8kb"])
def test_field_and_set_say_the_same(qtbot: Any, window: Any, bad: str) -> None:
    edit = retype(qtbot, window, SEQ, bad)
    qtbot.keyClick(edit, Qt.Key.Key_Return)
    assert _binding(window, SEQ).error == _cli_message(bad)


@pytest.mark.parametrize(("text", "value"), [("8k", 8000), ("8,192", 8192)])
def test_field_reads_suffixes_as_set_does(qtbot: Any, window: Any, text: str, value: int) -> None:
    edit = retype(qtbot, window, SEQ, text)
    qtbot.keyClick(edit, Qt.Key.Key_Return)
    qtbot.waitUntil(lambda: window.doc.plan.batch.seq_len == value, timeout=3000)
    assert apply_sets(default_plan(), [f"{SEQ}={text}"]).batch.seq_len == value


def test_the_dgx_a100_node_preset_is_bought_whole(qtbot: Any, window: Any) -> None:
    """Picking "NVIDIA DGX A100" and applying it sets the A100 80 GB, the datasheet's
    figures and whole-node rounding: the default plan's 4-GPU partial node becomes one
    whole 8-GPU system (engine.layout.point)."""
    from engine.layout.point import procurement

    hardware = window.tabs["hardware"]
    hardware.node.setCurrentIndex(hardware.node.findData("dgx-a100"))
    hardware.apply_node()
    plan = window.doc.plan
    assert plan.hardware.accelerator == "a100-sxm-80gb"
    assert plan.policy.rounding == "whole_node"
    assert procurement(4, plan.hardware.gpus_per_node, plan.policy.rounding) == 8
    assert window.doc.undo_stack.undoText() == f"Node {hardware.node.currentText()}"
