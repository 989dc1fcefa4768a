"""Inputs that misled: a preset picked but not applied says so under its chooser, and
usable HBM above HBM is warned at the Hardware tab with a one-click fix."""

from __future__ import annotations

from typing import Any


def _settle(qtbot: Any, win: Any) -> None:
    qtbot.waitUntil(lambda: not win.doc.pending)


def test_a_picked_model_preset_says_it_is_not_applied(qtbot: Any, window: Any) -> None:
    """Picking Llama-3.1-70B over the default 8B plan changes nothing yet: the hint names
    it and the button; Apply makes it the plan's and the hint goes; picking the plan's
    own preset again shows none."""
    tab = window.tabs["model"]
    hint = tab.pending.label
    assert hint.isHidden()
    tab.preset.setCurrentIndex(tab.preset.findData("llama-3.1-70b"))
    assert not hint.isHidden() and window.doc.plan.model.preset == "llama-3.1-8b"
    assert "is picked but not applied" in hint.text() and "Apply preset" in hint.text()
    tab.preset.setCurrentIndex(tab.preset.findData("llama-3.1-8b"))
    assert hint.isHidden()
    tab.preset.setCurrentIndex(tab.preset.findData("llama-3.1-70b"))
    tab.apply_preset()
    _settle(qtbot, window)
    assert window.doc.plan.model.preset == "llama-3.1-70b" and hint.isHidden()


def test_a_picked_accelerator_says_it_is_not_applied(qtbot: Any, window: Any) -> None:
    tab = window.tabs["hardware"]
    hint = tab.pending_acc.label
    tab.accel.setCurrentIndex(tab.accel.findData("h200-sxm-141gb"))
    assert not hint.isHidden() and "Apply accelerator" in hint.text()
    tab.apply_accelerator()
    _settle(qtbot, window)
    assert hint.isHidden() and window.doc.plan.hardware.accelerator == "h200-sxm-141gb"


def test_usable_hbm_above_hbm_is_warned_and_clamped(qtbot: Any, window: Any) -> None:
    """HBM typed as 80 GB (80,000,000,000 B) under the H100 preset's usable 84.93 GB: the
    tab warns (the verdict compares with usable HBM), and the button sets usable to HBM
    as one undoable edit."""
    tab = window.tabs["hardware"]
    assert tab.usable_warning.isHidden()
    window.doc.set("hardware.hbm_bytes", 80_000_000_000)
    _settle(qtbot, window)
    assert not tab.usable_warning.isHidden() and not tab.clamp.isHidden()
    assert "is more than the HBM (80.00 GB" in tab.usable_warning.text()
    tab.clamp.click()
    _settle(qtbot, window)
    assert window.doc.plan.hardware.usable_hbm_bytes == 80_000_000_000
    assert tab.usable_warning.isHidden()
    assert window.doc.undo_stack.undoText() == "Set usable HBM to HBM"


def test_switching_to_lora_says_the_stack_moved(qtbot: Any, window: Any) -> None:
    """stack.name auto: the default plan runs on pytorch; method.kind lora moves it to
    hf_trainer (engine/stacks/catalog.py concrete_stack: LoRA / QLoRA are peft on the HF
    Trainer). The Method tab says so, naming both and how to keep the old one."""
    tab = window.tabs["method"]
    assert tab.stack_moved.isHidden()
    window.doc.set("method.kind", "lora")
    _settle(qtbot, window)
    assert not tab.stack_moved.isHidden()
    text = tab.stack_moved.text()
    assert "moved from pytorch to hf_trainer" in text and "keep pytorch" in text


def test_kind_custom_starts_computable(qtbot: Any, window: Any) -> None:
    """Kind = custom with no roles and no count was "method.custom needs roles or a
    trainable count" the moment it was picked; it now starts from every parameter of
    Llama-3.1-8B (8,030,261,248), in the same undo step, and the estimate stays."""
    steps = window.doc.undo_stack.count()
    assert window.doc.set("method.kind", "custom")
    _settle(qtbot, window)
    plan = window.doc.plan
    assert plan.method.kind == "custom" and plan.method.custom.count == 8_030_261_248
    assert window.doc.estimate_error is None and window.doc.undo_stack.count() == steps + 1


def _caption(win: Any, path: str) -> str:
    return next(p.bindings[path] for p in win.tabs.values() if path in p.bindings).caption.text()


def test_after_a_preset_the_defaults_are_the_presets(qtbot: Any, window: Any) -> None:
    """Llama-3.1-70B applied: hidden 8,192 and 80 layers (its config.json) read as their
    own defaults, not the built-in 8B plan's 4,096 and 32; a field no preset fills (the
    sequence length) keeps the built-in default."""
    assert "def. 4,096" in _caption(window, "model.architecture.hidden")
    tab = window.tabs["model"]
    tab.preset.setCurrentIndex(tab.preset.findData("llama-3.1-70b"))
    tab.apply_preset()
    _settle(qtbot, window)
    assert "def. 8,192" in _caption(window, "model.architecture.hidden")
    assert "def. 80" in _caption(window, "model.architecture.layers")
    assert "def. 4,096" in _caption(window, "batch.seq_len")
