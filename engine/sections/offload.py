"""The Offload section: what leaves the GPU for host RAM or NVMe, and the host side."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from engine.sections.base import ByteRange, Section
from engine.units import GiB

Placement = Literal["none", "cpu", "nvme"]


class OffloadSection(Section):
    """Offload placements (DeepSpeed ZeRO-Offload / Infinity, FSDP CPU offload).

    Offload changes capacity, never promises throughput: the transfer bandwidths here
    only produce a lower bound on transfer time.
    """

    optimizer: Placement = Field(default="none", description="Optimizer state placement.")
    params: Placement = Field(default="none", description="Parameter placement (ZeRO-3 only).")
    pin_memory: bool = Field(
        default=True, description="Pinned host buffers (DeepSpeed default True since Aug 2026)."
    )
    param_buffer_count: int = Field(
        default=5, ge=1, le=1000, description="offload_param buffer_count."
    )
    param_buffer_elements: int = Field(
        default=100_000_000, ge=1, le=10**12, description="offload_param buffer_size (elements)."
    )
    optimizer_buffer_count: int = Field(
        default=4, ge=1, le=1000, description="offload_optimizer buffer_count."
    )
    sub_group_size: int = Field(
        default=1_000_000_000, ge=1, le=10**13, description="DeepSpeed sub_group_size (elements)."
    )
    aio_block_size: int = Field(
        default=1_048_576, ge=512, le=2**30, description="aio block size (bytes)."
    )
    aio_queue_depth: int = Field(default=8, ge=1, le=1024, description="aio queue depth.")
    step_time_target_s: float | None = Field(
        default=None,
        gt=0,
        le=1e6,
        description="Required step time (seconds), to check transfers against.",
    )


class HostSection(Section):
    """Host-side consumers of RAM besides offloaded state."""

    model_init: Literal["auto", "meta", "zero_init", "full_copy_per_rank"] = Field(
        default="auto",
        description="How the model is materialised: on the meta device / zero.Init (no "
        "full copy) or a full copy loaded by every rank (a real host peak). auto = the "
        "stack's: zero.Init under DeepSpeed ZeRO-3, a full copy per rank under DeepSpeed "
        "ZeRO-1/2 and HF Trainer (from_pretrained on every rank), meta otherwise.",
    )
    dataloader_workers_per_rank: int = Field(default=2, ge=0, le=256)
    dataloader_worker_bytes: ByteRange = Field(
        default=ByteRange(low=GiB // 2, high=2 * GiB),
        description="Resident memory of one data-loader worker (bytes).",
    )
    os_reserve_bytes: int = Field(
        default=16 * GiB,
        ge=0,
        le=10**15,
        description="Host RAM kept for the OS and daemons (bytes).",
    )
    process_rss_bytes: ByteRange = Field(
        default=ByteRange(low=2 * GiB, high=6 * GiB),
        description="Resident host memory of one training process beyond tensors: Python, "
        "the CUDA/cuDNN/NCCL libraries and the CUDA context's host side (bytes). An "
        "assumption; measure it with the probe.",
    )


class CheckpointSection(Section):
    """How checkpoints are written and kept."""

    format: Literal["sharded", "consolidated_rank0", "consolidated_every_rank"] = Field(
        default="sharded",
        description="Distributed (sharded) checkpoint, or a full state dict gathered on "
        "rank 0 / on every rank.",
    )
    include_optimizer: bool = Field(default=True)
    retention: int = Field(default=3, ge=1, le=10_000, description="Checkpoints kept (count).")
    staging: Literal["host", "gpu"] = Field(
        default="host",
        description="Where a consolidated state dict is assembled; under FSDP1 also where "
        "a sharded one's shard clones stay (gpu: no ShardedStateDictConfig offload_to_cpu, "
        "accelerate before 0.31).",
    )
    location: Literal["shared_fs", "local_nvme"] = Field(
        default="shared_fs",
        description="Where checkpoints are written: the shared file system (checkpoint "
        "ledger) or each node's local NVMe (NVMe ledger).",
    )
