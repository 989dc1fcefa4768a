"""Checkpoint storage: one checkpoint's content, and how many are kept.

A checkpoint holds the model's weights (LoRA: only the adapters, as PEFT saves them),
and when resuming is wanted the optimizer (master copy, moments, step counters) plus
small per-rank RNG and scheduler state. Sharded and consolidated formats hold the same
bytes; they differ in who assembles them (host and HBM rows, not storage).
"""

from __future__ import annotations

from dataclasses import dataclass

from engine.ledger.nodes.whole_model import whole_bytes
from engine.ledger.row import CHECKPOINT, Row, make_row
from engine.plan import Plan
from engine.units import fmt_count

RNG_SCHEDULER_BYTES_PER_RANK = 8 * 1024
"""Per-rank RNG states (torch CPU generator 5,056 B, CUDA 16 B, Python and NumPy
≈ 2.5 KB each) and the scheduler's state dict: under 8 KiB per rank."""


@dataclass(frozen=True, slots=True)
class CheckpointSize:
    """One checkpoint, by part (bytes)."""

    weights: int
    optimizer: int
    extra: int
    weights_words: str

    @property
    def total(self) -> int:
        return self.weights + self.optimizer + self.extra


def checkpoint_size(plan: Plan) -> CheckpointSize:
    """The bytes of one checkpoint of this plan."""
    arch, method = plan.model.architecture, plan.method
    if method.kind in ("lora", "qlora"):
        weights = whole_bytes(arch, method, frozenset({"adapters"}))
        words = "LoRA adapters only (PEFT save_pretrained)"
    else:
        weights = whole_bytes(arch, method, frozenset({"weights", "adapters"}))
        words = "every model weight in its training dtype"
    optimizer = 0
    if plan.checkpoint.include_optimizer:
        optimizer = whole_bytes(arch, method, frozenset({"optimizer"}))
    extra = RNG_SCHEDULER_BYTES_PER_RANK * plan.parallelism.world_size
    return CheckpointSize(weights, optimizer, extra, words)


def checkpoint_rows(plan: Plan) -> list[Row]:
    """The checkpoint ledger on the shared file system (job-wide)."""
    size = checkpoint_size(plan)
    ck = plan.checkpoint
    world = plan.parallelism.world_size
    rows = [
        make_row(
            id="checkpoint.weights",
            label="Checkpoint: weights",
            state="checkpoint",
            location="checkpoint",
            kind="persistent",
            group="checkpoint",
            low=size.weights,
            high=size.weights,
            formula=f"{size.weights_words}: {fmt_count(size.weights)} B",
            source="torch-dcp",
            scope="job",
        ),
    ]
    if size.optimizer:
        rows.append(
            make_row(
                id="checkpoint.optimizer",
                label="Checkpoint: optimizer state",
                state="checkpoint",
                location="checkpoint",
                kind="persistent",
                group="checkpoint",
                low=size.optimizer,
                high=size.optimizer,
                formula="master copy, moments and step counters of every "
                f"trainable tensor: {fmt_count(size.optimizer)} B",
                source="torch-dcp",
                scope="job",
            )
        )
    rows.append(
        make_row(
            id="checkpoint.rng_scheduler",
            label="Checkpoint: RNG and scheduler state",
            state="checkpoint",
            location="checkpoint",
            kind="persistent",
            group="checkpoint",
            low=size.extra,
            high=size.extra,
            formula=f"{world} ranks × {fmt_count(RNG_SCHEDULER_BYTES_PER_RANK)}"
            f" B = {fmt_count(size.extra)} B",
            source="torch-dcp",
            scope="job",
        )
    )
    if ck.location == "local_nvme":
        return rows  # retained copies live on the nodes' NVMe (NVMe ledger)
    if ck.retention > 1:
        kept = (ck.retention - 1) * size.total
        rows.append(
            make_row(
                id="checkpoint.retained",
                label="Checkpoint: older checkpoints kept",
                state="checkpoint",
                location="checkpoint",
                kind="persistent",
                group="checkpoint",
                low=kept,
                high=kept,
                formula=f"({ck.retention} kept − 1) × {fmt_count(size.total)} B "
                f"= {fmt_count(kept)} B",
                source="torch-dcp",
                scope="job",
            )
        )
    rows.append(
        make_row(
            id="checkpoint.in_flight",
            label="Checkpoint: next one being written",
            state="checkpoint",
            location="checkpoint",
            kind="peak",
            group="checkpoint",
            low=size.total,
            high=size.total,
            formula=f"one more checkpoint of {fmt_count(size.total)} B exists "
            "while it is written, before the oldest is deleted",
            source="torch-dcp",
            scope="job",
            phases=CHECKPOINT,
        )
    )
    return rows
