"""This wave's plan fields in the window (issues 35 and 36): each has a widget with its
description as tooltip, the "from stack" badge where the stack decides it, and is greyed
with the reason where nothing reads it (engine/stacks/applicability.py)."""

from __future__ import annotations

from typing import Any

WAVE_FIELDS = (
    "method.dropout",
    "method.lora.dropout",
    "method.qlora.quant_storage",
    "method.optimizer.precision_aware",
    "method.optimizer.paged",
    "method.optimizer.in_backward",
    "method.precision.float8",
    "method.precision.float8_all_gather",
    "method.recompute.modules",
    "method.recompute.offload_activations",
    "workload.torch_compile",
    "runtime.loss_impl",
    "runtime.zero_grad",
    "runtime.bitsandbytes_version",
    "runtime.transformers_version",
    "runtime.torchtitan_version",
    "runtime.reserve_model",
    "runtime.fragmentation.low",
    "runtime.side_stream_cache.high",
    "runtime.expandable_segments",
    "runtime.max_split_size_mb",
)


def _binding(win: Any, path: str) -> Any:
    return next(p.bindings[path] for p in win.tabs.values() if path in p.bindings)


def test_every_new_field_has_a_widget_with_its_description(window: Any) -> None:
    for path in WAVE_FIELDS:
        tip = _binding(window, path).editor.toolTip()
        assert path in tip, path
    frag = _binding(window, "runtime.fragmentation.low").editor.toolTip()
    assert "Compute-stream fragmentation" in frag  # the band's description on its low
    assert _binding(window, "runtime.max_split_size_mb").spec.unit == "MiB"


def test_the_stack_decides_loss_zero_grad_and_expandable_segments(window: Any) -> None:
    """Default plan, plain PyTorch stack: eager cross-entropy, set_to_none, and
    PyTorch's default expandable_segments off (engine/stacks/stack_rules.py)."""
    assert _binding(window, "runtime.loss_impl").caption.text() == "from stack pytorch<br>= eager"
    zero = _binding(window, "runtime.zero_grad").caption.text()
    assert zero == "from stack pytorch<br>= set_to_none"
    assert "from stack pytorch" in _binding(window, "runtime.expandable_segments").caption.text()


def test_fields_grey_and_come_back_with_what_reads_them(qtbot: Any, window: Any) -> None:
    """float8_all_gather needs Float8 under FSDP2 (the default strategy); the fraction
    reserve model reads allocator_reserve, the allocator model fragmentation."""
    gather = _binding(window, "method.precision.float8_all_gather").editor
    assert not gather.isEnabled() and "FSDP2" in gather.toolTip()
    window.doc.set("method.precision.float8", "tensorwise")
    qtbot.waitUntil(lambda: not window.doc.pending)
    assert gather.isEnabled()
    fraction = _binding(window, "runtime.allocator_reserve.low").editor
    frag = _binding(window, "runtime.fragmentation.low").editor
    assert frag.isEnabled() and not fraction.isEnabled()
    window.doc.set("runtime.reserve_model", "fraction")
    qtbot.waitUntil(lambda: not window.doc.pending)
    assert fraction.isEnabled() and not frag.isEnabled()
    assert window.doc.undo_stack.undoText() == "Set allocator reserve model to fraction"


def test_the_guide_and_the_verdict_say_what_fit_adds_up(window: Any) -> None:
    """The guide names the three parts of the fit figure and the outlined cache; the
    verdict's peak tooltip lists the parts (engine/verdict.py fit_parts) of the default
    plan — live 48.73 GB (the two 32 MiB cuBLAS workspaces among them) + fragmentation
    3.30 GB + outside PyTorch 2.00 GB (NCCL; the CUDA context is net of the capacity),
    high ends — with reserved beside them."""
    from gui.help import guide_html

    guide = guide_html()
    assert "fragmentation the caching\nallocator cannot release" in guide
    assert "allocator cache, released before OOM" in guide
    tip = window.verdict.values["peak"].toolTip()
    assert "live tensors" in tip and "48.73 GB" in tip
    assert "cannot release" in tip and "3.30 GB" in tip
    assert "outside PyTorch" in tip and "2.00 GB" in tip
    assert "reserved (allocator)" in tip
    assert "reserved" in window.verdict.values["peak"].text()
