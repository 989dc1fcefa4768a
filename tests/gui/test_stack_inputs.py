"""The training stack in the window: the chooser, the "from stack" badges on inputs the
stack decides, and the NCCL band as auto / custom."""

from __future__ import annotations

from typing import Any

from PySide6.QtWidgets import QComboBox

from engine.stacks.defaults import resolve_stack_defaults
from engine.units import GB

NCCL = "runtime.nccl_bytes_per_communicator"
POLICY = "method.precision.policy"


def _binding(win: Any, path: str) -> Any:
    return next(p.bindings[path] for p in win.tabs.values() if path in p.bindings)


def _band(win: Any) -> Any:
    return next(b for p in win.tabs.values() for b in p.bands if b.spec.path == NCCL)


def test_the_chooser_lists_every_stack(window: Any) -> None:
    combo = _binding(window, "stack.name").editor
    assert isinstance(combo, QComboBox)
    names = [combo.itemData(i) for i in range(combo.count())]
    assert names == ["auto", "pytorch", "hf_trainer", "torchtitan", "deepspeed", "megatron_core"]


def test_auto_fields_name_the_stack_and_its_value(window: Any) -> None:
    """The default plan (FSDP2, full) runs on the plain PyTorch stack: its precision policy
    is auto, and the badge says the stack gave autocast; choosing DeepSpeed's ZeRO-3 moves
    the badge to deepspeed's amp_master (bf16.enabled + fp32 master), still auto."""
    policy = _binding(window, POLICY)
    assert window.doc.plan.method.precision.policy == "auto"
    assert policy.caption.text() == "from stack pytorch<br>= autocast"
    assert policy.caption.property("fromStack") is True
    assert "source: stack-pytorch" in policy.editor.toolTip()
    assert _binding(window, "stack.name").caption.text() == "auto picks<br>= pytorch"
    window.doc.set("parallelism.strategy", "zero3")
    assert policy.caption.text() == "from stack deepspeed<br>= amp_master"
    assert window.doc.plan.method.precision.policy == "auto"


def test_a_value_the_user_sets_loses_its_badge(window: Any) -> None:
    policy = _binding(window, POLICY)
    window.doc.set(POLICY, "pure_16bit")
    assert policy.derived is None and "from stack" not in policy.caption.text()
    assert policy.caption.property("fromStack") is False
    window.doc.undo()
    assert policy.derived is not None and policy.derived.value == "autocast"


def test_the_nccl_band_is_auto_then_custom_then_auto(window: Any) -> None:
    """At auto the low and high show the stack's band for the H100 (0.5–2 GB), read-only;
    custom keeps that band as the user's own (numbers unchanged) and makes them editable;
    each switch is one undo step."""
    band, low, high = (
        _band(window),
        _binding(window, f"{NCCL}.low"),
        _binding(window, f"{NCCL}.high"),
    )
    stack_band = resolve_stack_defaults(window.doc.plan).derived[NCCL].value
    assert (
        band.editor.currentData() == "auto"
        and window.doc.plan.runtime.nccl_bytes_per_communicator is None
    )
    assert low.current_value() == stack_band["low"] and high.current_value() == stack_band["high"]
    assert not low.editor.isEnabled() and low.derived is not None
    assert "from stack pytorch" in band.caption.text()
    before = window.doc.estimate.heaviest.fit_peak
    band.choose("custom")
    window.doc.flush()
    custom = window.doc.plan.runtime.nccl_bytes_per_communicator
    assert custom is not None and (custom.low, custom.high) == (
        stack_band["low"],
        stack_band["high"],
    )
    assert window.doc.estimate.heaviest.fit_peak == before
    assert band.editor.currentData() == "custom" and low.editor.isEnabled() and low.derived is None
    assert window.doc.set(f"{NCCL}.high", 3 * GB)
    assert window.doc.plan.runtime.nccl_bytes_per_communicator.high == 3 * GB
    window.doc.undo()
    window.doc.undo()
    assert window.doc.plan.runtime.nccl_bytes_per_communicator is None
    assert band.editor.currentData() == "auto" and not high.editor.isEnabled()
    assert window.doc.undo_stack.undoText() == ""


def test_report_title_prints_the_resolved_precision() -> None:
    """The title page names the precision the engine computed with, never "auto":
    FSDP2 on the plain PyTorch stack keeps fp32 parameters and autocasts (reduce_dtype
    fp32); ZeRO-3 on DeepSpeed casts the module to bf16 with an fp32 master in the
    optimizer, and its gradients take the model dtype (runtime/engine.py get_data_types)."""
    from engine.plan import default_plan, with_value
    from gui.report.inputs import section_inputs
    from gui.report.sections.appendix import value_text
    from gui.report.sections.title import model_line, stack_line

    plan = default_plan()
    assert plan.method.precision.policy == "auto"
    assert "precision autocast (bf16 compute, fp32 gradients)" in model_line(plan)
    assert stack_line(plan).startswith("plain PyTorch script (auto: from the strategy")
    zero3 = with_value(plan, "parallelism.strategy", "zero3")
    assert "precision amp_master (bf16 compute, bf16 gradients)" in model_line(zero3)
    assert stack_line(zero3).startswith("DeepSpeed (auto")
    line = next(ln for ln in section_inputs(zero3, "method") if ln.path == POLICY)
    derived = resolve_stack_defaults(zero3).derived
    assert value_text(line, derived) == "auto → amp_master (stack deepspeed)"
