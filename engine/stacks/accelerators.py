"""Accelerator generations and the runtime memory defaults that depend on them.

NCCL's device memory grows with the channels a communicator opens (NVIDIA/nccl #986:
"linearly tied to the number of channels"), and newer NVLink generations open more of
them to reach their bandwidth, plus NVLS multicast buffers on NVSwitch systems (NeMo
launcher PR #127 turns NVLS off to save memory). So the per-communicator band is chosen
by generation, from the accelerator preset key in ``hardware.accelerator``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from engine.units import GB

Generation = Literal["ampere", "ada", "hopper", "blackwell", "amd", "unknown"]

_PREFIXES: tuple[tuple[str, Generation], ...] = (
    ("a100", "ampere"),
    ("a800", "ampere"),
    ("a10", "ampere"),
    ("h100", "hopper"),
    ("h200", "hopper"),
    ("h800", "hopper"),
    ("gh200", "hopper"),
    ("b200", "blackwell"),
    ("gb200", "blackwell"),
    ("b300", "blackwell"),
    ("gb300", "blackwell"),
    ("l40", "ada"),
    ("rtx-6000-ada", "ada"),
    ("rtx-4090", "ada"),
    ("rtx-5090", "blackwell"),
    ("mi", "amd"),
)


def generation_of(accelerator: str) -> Generation:
    """The generation an accelerator preset key names (``unknown`` for free text)."""
    key = accelerator.lower()
    for prefix, gen in _PREFIXES:
        if key.startswith(prefix):
            return gen
    return "unknown"


@dataclass(frozen=True, slots=True)
class NcclBand:
    """NCCL device memory per communicator on one generation, and why."""

    low: int
    high: int
    why: str
    source: str


_AMPERE = NcclBand(
    GB // 2,
    7 * GB // 10,
    "Ampere: 544 MB (2 ranks) to 688 MB (more ranks) per communicator measured on A100 "
    "(NVIDIA/nccl #964)",
    "nccl-buffers",
)
_HOPPER = NcclBand(
    GB // 2,
    2 * GB,
    "Hopper and later: more channels to reach NVLink bandwidth and NVLS buffers; about "
    "1.6 GB for one communicator reported (NVIDIA/nccl #864, #986)",
    "nccl-buffers-hopper",
)

NCCL_BANDS: dict[Generation, NcclBand] = {
    "ampere": _AMPERE,
    "ada": NcclBand(
        _AMPERE.low,
        _AMPERE.high,
        "PCIe-only Ada cards open no NVLink channels: the Ampere band (NVIDIA/nccl #964, #986)",
        "nccl-buffers",
    ),
    "hopper": _HOPPER,
    "blackwell": NcclBand(
        _HOPPER.low,
        _HOPPER.high,
        "Blackwell: no published per-communicator figure; Hopper's band (NVIDIA/nccl #864, "
        "#986), which NVLink 5's wider links can only raise",
        "nccl-buffers-hopper",
    ),
    "amd": NcclBand(
        _HOPPER.low,
        _HOPPER.high,
        "AMD (RCCL): no published figure; the widest band known for NCCL",
        "nccl-buffers-hopper",
    ),
    "unknown": NcclBand(
        _HOPPER.low,
        _HOPPER.high,
        "accelerator not in the presets: the widest band known for NCCL",
        "nccl-buffers-hopper",
    ),
}


def nccl_band(accelerator: str) -> NcclBand:
    """The default NCCL band per communicator for this accelerator."""
    return NCCL_BANDS[generation_of(accelerator)]
