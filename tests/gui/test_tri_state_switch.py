"""An optional switch (``bool | None``) is a combo of auto / on / off, so a value set by
hand can go back to the stack's default: DeepSpeed's overlap_comm, None = the stage's
default (True for ZeRO-3, False otherwise; engine.stacks.defaults._overlap_comm)."""

from __future__ import annotations

from typing import Any

from PySide6.QtWidgets import QComboBox

PATH = "parallelism.knobs.ds_overlap_comm"


def _choose(qtbot: Any, combo: QComboBox, text: str) -> None:
    index = next(i for i in range(combo.count()) if combo.itemText(i).startswith(text))
    combo.setCurrentIndex(index)
    combo.activated.emit(index)


def test_overlap_comm_goes_on_off_and_back_to_auto(qtbot: Any, window: Any) -> None:
    doc = window.doc
    doc.set("parallelism.strategy", "zero3", merge=False)
    qtbot.waitUntil(lambda: not doc.pending)
    binding = window.tabs["parallelism"].bindings[PATH]
    combo = binding.editor
    assert isinstance(combo, QComboBox) and combo.count() == 3
    assert doc.plan.parallelism.knobs.ds_overlap_comm is None
    assert combo.currentIndex() == 0 and combo.itemText(0) == "auto (on)"  # ZeRO-3's
    _choose(qtbot, combo, "off")
    assert doc.plan.parallelism.knobs.ds_overlap_comm is False
    _choose(qtbot, combo, "on")
    assert doc.plan.parallelism.knobs.ds_overlap_comm is True
    _choose(qtbot, combo, "auto")
    assert doc.plan.parallelism.knobs.ds_overlap_comm is None
    doc.undo()
    assert doc.plan.parallelism.knobs.ds_overlap_comm is True
    assert combo.currentText() == "on"
    doc.undo()
    assert combo.currentText() == "off"
    doc.undo()
    assert doc.plan.parallelism.knobs.ds_overlap_comm is None and combo.currentIndex() == 0
    doc.set("parallelism.strategy", "zero1", merge=False)  # auto says the stage's default
    qtbot.waitUntil(lambda: not doc.pending)
    assert combo.currentIndex() == 0 and combo.itemText(0) == "auto (off)"


def test_training_methods_show_their_proper_names(qtbot: Any, window: Any) -> None:
    """The method chooser, the undo text and the suggestions say LoRA / QLoRA (the plan
    file keeps lora / qlora); so does the PEFT snippet's heading."""
    from engine.exports.peft_snippet import peft_snippet
    from engine.plan import default_plan
    from engine.whatif.diagnostics import candidate_changes

    combo = window.tabs["method"].bindings["method.kind"].editor
    texts = [combo.itemText(i) for i in range(combo.count())]
    assert "LoRA" in texts and "QLoRA" in texts and "qlora" not in texts
    index = combo.findData("qlora")
    combo.setCurrentIndex(index)
    combo.activated.emit(index)
    assert window.doc.plan.method.kind == "qlora"
    assert window.doc.undo_stack.undoText() == "Set training method to QLoRA"
    labels = [label for label, _ in candidate_changes(default_plan())]
    assert {"train with LoRA", "train with QLoRA"} <= set(labels)
    snippet = peft_snippet(window.doc.plan)
    assert snippet is not None and "PEFT QLoRA settings" in snippet.text
