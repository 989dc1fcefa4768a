"""Framework configs generated from a plan, and importers that prefill a plan."""

from __future__ import annotations

from collections.abc import Callable

from engine.exports.accelerate import export_accelerate
from engine.exports.common import Export
from engine.exports.deepspeed import export_deepspeed
from engine.exports.fsdp2 import export_fsdp2
from engine.exports.megatron import export_megatron
from engine.plan import Plan

EXPORTERS: dict[str, Callable[[Plan], Export]] = {
    "deepspeed": export_deepspeed,
    "fsdp2": export_fsdp2,
    "accelerate": export_accelerate,
    "megatron": export_megatron,
}

__all__ = ["EXPORTERS", "Export"]
