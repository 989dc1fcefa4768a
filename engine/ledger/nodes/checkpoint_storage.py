"""Checkpoint storage: one checkpoint's content, and how many are kept.

A checkpoint holds the model's weights (LoRA: only the adapters, as PEFT saves them),
and when resuming is wanted the optimizer (master copy, moments, step counters) plus
small per-rank RNG and scheduler state. Sharded and consolidated formats hold the same
bytes; they differ in who assembles them (host and HBM rows, not storage).
"""

from __future__ import annotations

from dataclasses import dataclass

from engine.ledger.nodes.whole_model import whole_bytes
from engine.ledger.row import ALL_PHASES, Phase, Row, RowKind
from engine.plan import Plan
from engine.units import fmt_count

RNG_SCHEDULER_BYTES_PER_RANK = 8 * 1024
"""Per-rank RNG states (torch CPU generator 5,056 B, CUDA 16 B, Python and NumPy
≈ 2.5 KB each) and the scheduler's state dict: under 8 KiB per rank."""

CHECKPOINT_PHASE: frozenset[Phase] = frozenset({"checkpoint"})


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
        weights = whole_bytes(arch, method, "hbm.weights.adapters")
        words = "LoRA adapters only (PEFT save_pretrained)"
    else:
        weights = whole_bytes(arch, method, "hbm.weights")
        words = "every model weight in its training dtype"
    optimizer = 0
    if plan.checkpoint.include_optimizer:
        optimizer = whole_bytes(arch, method, "hbm.master_weights") + whole_bytes(
            arch, method, "hbm.optimizer."
        )
    extra = RNG_SCHEDULER_BYTES_PER_RANK * plan.parallelism.world_size
    return CheckpointSize(weights, optimizer, extra, words)


def _row(
    rid: str,
    label: str,
    n: int,
    formula: str,
    phases: frozenset[Phase] = ALL_PHASES,
    kind: RowKind = "persistent",
) -> Row:
    return Row(
        id=rid,
        label=label,
        location="checkpoint",
        kind=kind,
        group="checkpoint",
        low=n,
        high=n,
        formula=formula,
        source="torch-dcp",
        scope="job",
        phases=phases,
    )


def checkpoint_rows(plan: Plan) -> list[Row]:
    """The checkpoint ledger on the shared file system (job-wide)."""
    size = checkpoint_size(plan)
    ck = plan.checkpoint
    world = plan.parallelism.world_size
    rows = [
        _row(
            "checkpoint.weights",
            "Checkpoint: weights",
            size.weights,
            f"{size.weights_words}: {fmt_count(size.weights)} B",
        ),
    ]
    if size.optimizer:
        rows.append(
            _row(
                "checkpoint.optimizer",
                "Checkpoint: optimizer state",
                size.optimizer,
                "master copy, moments and step counters of every "
                f"trainable tensor: {fmt_count(size.optimizer)} B",
            )
        )
    rows.append(
        _row(
            "checkpoint.rng_scheduler",
            "Checkpoint: RNG and scheduler state",
            size.extra,
            f"{world} ranks × {fmt_count(RNG_SCHEDULER_BYTES_PER_RANK)}"
            f" B = {fmt_count(size.extra)} B",
        )
    )
    if ck.location == "local_nvme":
        return rows  # retained copies live on the nodes' NVMe (NVMe ledger)
    if ck.retention > 1:
        kept = (ck.retention - 1) * size.total
        rows.append(
            _row(
                "checkpoint.retained",
                "Checkpoint: older checkpoints kept",
                kept,
                f"({ck.retention} kept − 1) × {fmt_count(size.total)} B = {fmt_count(kept)} B",
            )
        )
    rows.append(
        _row(
            "checkpoint.in_flight",
            "Checkpoint: next one being written",
            size.total,
            f"one more checkpoint of {fmt_count(size.total)} B exists "
            "while it is written, before the oldest is deleted",
            CHECKPOINT_PHASE,
            "peak",
        )
    )
    return rows
