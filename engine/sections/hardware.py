"""The Hardware section: the accelerator, its usable capacity and the node around it."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator

from engine.errors import PlanError, Problem, quote
from engine.sections.base import Section
from engine.sections.hardware_catalogue import accelerator_keys
from engine.units import GB, GiB

H100_USABLE_BYTES = 84_932_558_848
"""What PyTorch can allocate on an H100 SXM 80 GB: ≈79.1 GiB (memory-model §5: 79.65 GiB
shown by nvidia-smi, ≈79.1–79.3 GiB to PyTorch; the low end, rounded to 2 MiB)."""


class HardwareSection(Section):
    """One accelerator kind and the node that hosts it."""

    accelerator: str = Field(
        default="h100-sxm-80gb",
        min_length=1,
        max_length=100,
        description="Accelerator catalogue key (resources/hardware/accelerators.json), or "
        "'custom' for hardware not in it. The key picks NCCL's memory band by generation; "
        "capacities and bandwidths are the fields below (a preset fills them).",
    )
    hbm_bytes: int = Field(
        default=80 * GiB,
        ge=1,
        le=10**14,
        description='Physical HBM capacity (bytes): a vendor\'s "80 GB" of HBM is binary, '
        "80 GiB (memory-model §5: an H100 80 GB shows 79.65 GiB in nvidia-smi).",
    )
    usable_policy: Literal["framework_visible", "marketed", "custom"] = Field(
        default="framework_visible",
        description="Which capacity decides fit: what the framework can allocate "
        "(default), the marketed figure, or usable_hbm_bytes as entered.",
    )
    usable_hbm_bytes: int = Field(
        default=H100_USABLE_BYTES,
        ge=1,
        le=10**14,
        description="Capacity the framework can allocate (bytes); see memory-model §5.",
    )
    gpus_per_node: int = Field(default=8, ge=1, le=1024, description="Accelerators per node.")
    host_ram_bytes_per_node: int = Field(
        default=2048 * GiB,
        ge=0,
        le=10**16,
        description="Host RAM per node (bytes); DGX H100: 2 TB.",
    )
    nvme_bytes_per_node: int = Field(
        default=30_720 * GB,
        ge=0,
        le=10**17,
        description="Local NVMe per node (bytes); DGX H100: 8 × 3.84 TB.",
    )
    intra_node_gbps: float = Field(
        default=450.0,
        gt=0,
        le=100_000,
        description="GPU-to-GPU bandwidth inside a node, per GPU and direction (GB/s): "
        "H100 SXM NVLink 4 carries 900 GB/s in both directions together, 450 each way.",
    )
    inter_node_gbps: float = Field(
        default=50.0,
        gt=0,
        le=100_000,
        description="Network bandwidth between nodes, per GPU and direction (GB/s): DGX "
        "H100 has one 400 Gb/s ConnectX-7 NIC per GPU = 50 GB/s.",
    )
    host_link_gbps: float | None = Field(
        default=None, gt=0, le=100_000, description="Device↔host bandwidth per GPU (GB/s)."
    )
    nvme_gbps: float | None = Field(
        default=None, gt=0, le=100_000, description="Host↔NVMe bandwidth per node (GB/s)."
    )

    @field_validator("accelerator")
    @classmethod
    def _known_accelerator(cls, key: str) -> str:
        """An unknown key used to pass as free text and the plan ran on the H100 figures
        it kept; a typo (``rtx-4090`` for ``rtx-4090-24gb``) must be said, not absorbed."""
        keys = accelerator_keys()
        if key not in keys:  # a PlanError: its message is shown whole, the key list unclipped
            raise PlanError(
                [
                    Problem(
                        ("hardware.accelerator",),
                        f"hardware.accelerator {quote(key)} is not a known accelerator key; "
                        f"the known keys are {', '.join(keys)}",
                    )
                ]
            )
        return key

    @property
    def capacity_bytes(self) -> int:
        """The HBM capacity that decides fit under the chosen policy."""
        if self.usable_policy == "marketed":
            return self.hbm_bytes
        return self.usable_hbm_bytes
