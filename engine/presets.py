"""Presets: accelerators and nodes (``resources/hardware/accelerators.json``), and plans
built around a model preset (the default plan with another model).

The presets only fill the Hardware section's fields; a plan stores the numbers inline, so
editing the catalogue never changes a saved plan. Each accelerator says where its usable
capacity comes from (``usable_source``), because that figure decides fit; node fields that
are not known for a node are ``None`` and leave the user's entry alone.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import Any

from engine.models.presets import PresetError, load_preset
from engine.plan import Plan, default_plan
from engine.sections.hardware_catalogue import catalogue
from engine.sections.model import ModelSection


@dataclass(frozen=True, slots=True)
class Accelerator:
    """One accelerator model: marketed and usable HBM, with the basis of each."""

    key: str
    name: str
    hbm_bytes: int
    usable_hbm_bytes: int
    usable_source: str
    source: str
    intra_node_gbps: float
    intra_node_source: str


@dataclass(frozen=True, slots=True)
class Node:
    """One node model; ``None`` fields are unknown and not applied."""

    key: str
    name: str
    accelerator: str | None
    gpus_per_node: int
    host_ram_bytes_per_node: int | None
    nvme_bytes_per_node: int | None
    source: str
    inter_node_gbps: float | None
    inter_node_source: str
    sold_whole: bool = False
    """A system sold only whole (a DGX): no single GPU or partial node of it is bought,
    so applying the preset rounds procurement to whole nodes (``policy.rounding``)."""


@cache
def accelerators() -> tuple[Accelerator, ...]:
    """Every accelerator preset, in catalogue order."""
    return tuple(Accelerator(**item) for item in catalogue()["accelerators"])


@cache
def nodes() -> tuple[Node, ...]:
    """Every node preset, in catalogue order."""
    return tuple(Node(**item) for item in catalogue()["nodes"])


def accelerator(key: str) -> Accelerator:
    """The accelerator preset named ``key``; ``KeyError`` names the unknown key."""
    for acc in accelerators():
        if acc.key == key:
            return acc
    raise KeyError(f"unknown accelerator preset {key!r}")


def node(key: str) -> Node:
    """The node preset named ``key``; ``KeyError`` names the unknown key."""
    for item in nodes():
        if item.key == key:
            return item
    raise KeyError(f"unknown node preset {key!r}")


def accelerator_changes(key: str) -> dict[str, Any]:
    """Hardware-section field changes (dotted paths) that apply an accelerator preset."""
    acc = accelerator(key)
    return {
        "hardware.accelerator": acc.key,
        "hardware.hbm_bytes": acc.hbm_bytes,
        "hardware.usable_hbm_bytes": acc.usable_hbm_bytes,
        "hardware.intra_node_gbps": acc.intra_node_gbps,
    }


def node_changes(key: str) -> dict[str, Any]:
    """Field changes that apply a node preset, including its accelerator when it has one."""
    item = node(key)
    changes: dict[str, Any] = {"hardware.gpus_per_node": item.gpus_per_node}
    if item.accelerator is not None:
        changes.update(accelerator_changes(item.accelerator))
    if item.host_ram_bytes_per_node is not None:
        changes["hardware.host_ram_bytes_per_node"] = item.host_ram_bytes_per_node
    if item.nvme_bytes_per_node is not None:
        changes["hardware.nvme_bytes_per_node"] = item.nvme_bytes_per_node
    if item.inter_node_gbps is not None:
        changes["hardware.inter_node_gbps"] = item.inter_node_gbps
    if item.sold_whole:
        changes["policy.rounding"] = "whole_node"
    return changes


def model_section_for(name: str) -> ModelSection:
    """The Model section for a preset, with its full architecture inline.

    Raises ``KeyError`` with a one-line message for an unknown preset.
    """
    try:
        display, spec = load_preset(name)
    except PresetError as exc:
        raise KeyError(f"{exc}; `memplan models` lists them") from exc
    return ModelSection(name=display, preset=name.strip().lower(), architecture=spec)


def plan_for_model_preset(name: str) -> Plan:
    """The default plan with the named model preset's architecture inline."""
    return default_plan().model_copy(update={"model": model_section_for(name)})
