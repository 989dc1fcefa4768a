"""Method tab: the training stack, full / LoRA / QLoRA / custom, optimizer, precision,
recompute, batch."""

from __future__ import annotations

from PySide6.QtWidgets import QLabel, QWidget

from engine.sections.method import (
    BatchSection,
    CustomTrainableSection,
    LoraSection,
    MethodSection,
    OptimizerSection,
    PrecisionSection,
    QloraSection,
    RecomputeSection,
)
from engine.sections.runtime import RuntimeSection
from engine.sections.stack import ConcreteStack, StackSection
from engine.sections.workload import WorkloadSection
from engine.stacks.catalog import concrete_stack, stack_info
from gui.document import PlanDocument
from gui.tabs.base import TabPage

ALLOCATOR_FIELDS = (
    "reserve_model",
    "allocator_reserve",
    "fragmentation",
    "side_stream_cache",
    "expandable_segments",
    "max_split_size_mb",
    "allocation_granularity_bytes",
)
"""The runtime fields that model the caching allocator: they decide the fragmentation
the fit test counts and the reserved figure beside it, so they sit together."""


class MethodTab(TabPage):
    def __init__(self, doc: PlanDocument, units: str, parent: QWidget | None = None) -> None:
        super().__init__(doc, units, parent)
        self.add_section("Training stack", StackSection, "stack")
        self.add_section("Training method", MethodSection, "method", include=("kind", "dropout"))
        self.stack_moved = QLabel("", self.widget())
        self.stack_moved.setObjectName("stackMoved")
        self.stack_moved.setWordWrap(True)
        self.stack_moved.setStyleSheet("color: #b36b00;")
        self.stack_moved.setHidden(True)
        self.column.addWidget(self.stack_moved)
        self._stack = self._concrete()
        doc.planChanged.connect(self._follow_stack)
        self.add_section("Batch", BatchSection, "batch")
        self.add_section("Samples, packing and compiler", WorkloadSection, "workload")
        self.add_section("Optimizer", OptimizerSection, "method.optimizer")
        self.add_section("Precision", PrecisionSection, "method.precision")
        self.add_section("Activation recomputation", RecomputeSection, "method.recompute")
        self.add_section("LoRA adapters", LoraSection, "method.lora")
        self.add_section("QLoRA (4-bit base)", QloraSection, "method.qlora", collapsed=True)
        self.add_section(
            "Custom trainable subset", CustomTrainableSection, "method.custom", collapsed=True
        )
        self.add_section(
            "Runtime and kernels",
            RuntimeSection,
            "runtime",
            exclude=ALLOCATOR_FIELDS,
            collapsed=True,
        )
        self.add_section(
            "Caching allocator (fit test)",
            RuntimeSection,
            "runtime",
            include=ALLOCATOR_FIELDS,
            collapsed=True,
        )
        self.finish()

    def _concrete(self) -> ConcreteStack:
        p = self.doc.plan
        return concrete_stack(p.stack.name, p.parallelism.strategy, p.method.kind)

    def _follow_stack(self) -> None:
        """Say so when an edit moved the stack left at auto (LoRA → hf_trainer): every
        input at auto then takes the new stack's defaults, which an analyst must see."""
        was, now = self._stack, self._concrete()
        self._stack = now
        if was == now:
            return
        if self.doc.plan.stack.name != "auto":
            self.stack_moved.setHidden(True)
            return
        self.stack_moved.setText(
            f"The training stack (auto) moved from {was} to {now} with this edit: "
            f"{stack_info(now).label} runs it, and every input left at auto now takes "
            f"{now}'s defaults. Choose stack.name above to keep {was}."
        )
        self.stack_moved.setHidden(False)
