"""Method tab: the training stack, full / LoRA / QLoRA / custom, optimizer, precision,
recompute, batch."""

from __future__ import annotations

from PySide6.QtWidgets import QWidget

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
from engine.sections.stack import StackSection
from engine.sections.workload import WorkloadSection
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
