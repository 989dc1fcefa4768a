"""Host RAM per node: offloaded state, staging buffers, loading, checkpoints, processes.

Every row is per node (the busiest one), so it compares directly with the node's RAM.
Each says how it scales: per rank × ranks on the node, or once per node.
"""

from __future__ import annotations

from dataclasses import replace

from engine.ledger.nodes.checkpoint_storage import CHECKPOINT_PHASE, checkpoint_size
from engine.ledger.nodes.node_view import NodeView
from engine.ledger.nodes.whole_model import base_param_count
from engine.ledger.row import ALL_PHASES, Phase, Row, RowKind
from engine.ledger.states.offload import GROUP_PAGEABLE, GROUP_PINNED
from engine.ledger.states.offload_rules import DEEPSPEED, FSDP
from engine.plan import Plan
from engine.units import fmt_count

STORED_BYTES = {"fp32": 4, "bf16": 2, "fp16": 2, "fp8_e4m3": 1}
OPTIMIZER_PHASE: frozenset[Phase] = frozenset({"optimizer"})


def _node_row(
    rid: str,
    label: str,
    group: str,
    low: int,
    high: int,
    formula: str,
    source: str,
    phases: frozenset[Phase] = ALL_PHASES,
    kind: RowKind = "persistent",
) -> Row:
    return Row(
        id=rid,
        label=label,
        location="host",
        kind=kind,
        group=group,
        low=low,
        high=high,
        formula=formula,
        source=source,
        phases=phases,
        scope="node",
    )


def per_node(row: Row, ranks: int) -> Row:
    """A per-rank row scaled to the node: × ranks on the node."""
    return replace(
        row,
        low=row.low * ranks,
        high=row.high * ranks,
        scope="node",
        formula=f"{ranks} ranks × ({row.formula})",
    )


def _buffers(plan: Plan, v: NodeView) -> list[Row]:
    off, r = plan.offload, v.ranks_per_node
    rows = []
    group = GROUP_PINNED if off.pin_memory else GROUP_PAGEABLE
    if off.optimizer == "nvme":
        elems = min(off.sub_group_size, v.trainable_shard_elems)
        n = off.optimizer_buffer_count * elems * 4 * r
        rows.append(
            _node_row(
                "host.nvme_swap.optimizer",
                "NVMe swap buffers (optimizer)",
                group,
                n,
                n,
                f"{r} ranks × {off.optimizer_buffer_count} buffers × min(sub_group_size "
                f"{fmt_count(off.sub_group_size)}, shard {fmt_count(v.trainable_shard_elems)}) "
                f"elements × 4 B (fp32) = {fmt_count(n)} B",
                "deepspeed-offload",
            )
        )
    if off.params == "nvme":
        n = off.param_buffer_count * off.param_buffer_elements * 2 * r
        rows.append(
            _node_row(
                "host.nvme_swap.params",
                "NVMe swap buffers (parameters)",
                group,
                n,
                n,
                f"{r} ranks × {off.param_buffer_count} buffers × "
                f"{fmt_count(off.param_buffer_elements)} elements × 2 B (16-bit) = "
                f"{fmt_count(n)} B",
                "deepspeed-offload",
            )
        )
    if off.params != "none" and plan.parallelism.strategy == "zero3" and plan.batch.grad_accum > 1:
        n = v.param_shard_elems * 2 * r
        rows.append(
            _node_row(
                "host.offload.grad_accumulation",
                "Gradient accumulation buffer (16-bit)",
                group,
                n,
                n,
                f"{r} ranks × {fmt_count(v.param_shard_elems)} partition elements "
                f"× 2 B, kept because grad_accum = {plan.batch.grad_accum} > 1 = {fmt_count(n)} B",
                "deepspeed-pinned",
            )
        )
    return rows


def _cpu_step_temp(plan: Plan, v: NodeView) -> list[Row]:
    """torch optimizers stepping on the CPU (FSDP offload, Megatron) with foreach make
    one state-dtype copy of the parameters; DeepSpeedCPUAdam updates in place."""
    strategy, impl = plan.parallelism.strategy, plan.method.optimizer.implementation
    on_cpu = plan.offload.optimizer == "cpu" or plan.offload.params == "cpu"
    if not on_cpu or strategy in DEEPSPEED or impl != "foreach":
        return []
    if strategy not in FSDP and strategy != "megatron_distopt":
        return []
    n = v.trainable_shard_elems * 4 * v.ranks_per_node
    return [
        _node_row(
            "host.optimizer_step_temp",
            "CPU optimizer step temporaries (foreach)",
            "temporaries",
            n,
            n,
            f"{v.ranks_per_node} ranks × {fmt_count(v.trainable_shard_elems)} trainable "
            f"shard elements × 4 B (one fp32 copy, _foreach_sqrt) = {fmt_count(n)} B",
            "torch-adamw",
            OPTIMIZER_PHASE,
            "peak",
        )
    ]


def _checkpoint_event(plan: Plan, v: NodeView) -> Row:
    """Model loading at start and checkpoint save never overlap: the row is the larger."""
    arch, r, world = plan.model.architecture, v.ranks_per_node, plan.parallelism.world_size
    stored = base_param_count(arch, plan.method) * STORED_BYTES[arch.stored_dtype]
    init = plan.host.model_init
    shard = stored * r // world
    if init == "full_copy_per_rank":
        load_low = load_high = stored * r
        load_words = f"every rank loads the full model: {r} × {fmt_count(stored)} B"
    elif init == "zero_init":
        load_low = load_high = shard
        load_words = f"zero.Init partitions at construction: {r}/{world} of {fmt_count(stored)} B"
    else:
        load_low, load_high = shard, max(shard, stored)
        load_words = (
            f"meta-device init: a sharded load ({r}/{world} of {fmt_count(stored)} B)"
            f" up to one full copy on rank 0 that is broadcast ({fmt_count(stored)} B)"
        )
    size = checkpoint_size(plan).total
    fmt = plan.checkpoint.format
    save_low = None
    if fmt == "sharded":
        save, save_low = size * r // world, 0
        save_words = (
            f"sharded save: streamed tensor by tensor (0 B) up to an async save "
            f"staging this node's {r}/{world} share of {fmt_count(size)} B"
        )
    elif fmt == "consolidated_rank0":
        save = size
        save_words = f"full state dict gathered on rank 0's host: {fmt_count(size)} B"
    else:
        save = size * r
        save_words = f"full state dict on every rank: {r} × {fmt_count(size)} B"
    low = max(load_low, save if save_low is None else save_low)
    high = max(load_high, save)
    return _node_row(
        "host.checkpoint_event",
        "Model load / checkpoint save (larger of the two)",
        "checkpoint",
        low,
        high,
        f"max(load: {load_words}; save: {save_words})",
        "torch-dcp",
        CHECKPOINT_PHASE,
        "peak",
    )


def host_rows(plan: Plan, v: NodeView) -> list[Row]:
    """The host-RAM ledger of the busiest node."""
    h, r = plan.host, v.ranks_per_node
    rows = [per_node(row, r) for row in v.offloaded if row.location == "host"]
    rows += _buffers(plan, v)
    rows += _cpu_step_temp(plan, v)
    rows.append(_checkpoint_event(plan, v))
    workers = h.dataloader_workers_per_rank * r
    if workers:
        rows.append(
            _node_row(
                "host.dataloader",
                "Data-loader workers",
                "processes",
                workers * h.dataloader_worker_bytes.low,
                workers * h.dataloader_worker_bytes.high,
                f"{r} ranks × {h.dataloader_workers_per_rank} workers × "
                f"{fmt_count(h.dataloader_worker_bytes.low)}–"
                f"{fmt_count(h.dataloader_worker_bytes.high)} B",
                "host-assumption",
            )
        )
    rows.append(
        _node_row(
            "host.processes",
            "Training processes (Python, CUDA libraries)",
            "processes",
            r * h.process_rss_bytes.low,
            r * h.process_rss_bytes.high,
            f"{r} ranks × {fmt_count(h.process_rss_bytes.low)}–"
            f"{fmt_count(h.process_rss_bytes.high)} B resident",
            "host-assumption",
        )
    )
    rows.append(
        _node_row(
            "host.os_reserve",
            "Operating system reserve",
            "processes",
            h.os_reserve_bytes,
            h.os_reserve_bytes,
            f"{fmt_count(h.os_reserve_bytes)} B kept free (input)",
            "host-assumption",
        )
    )
    return rows


def pinned_bytes(rows: list[Row]) -> int:
    """Page-locked bytes among the host rows (must fit ``ulimit -l``)."""
    return sum(r.high for r in rows if r.group == GROUP_PINNED)
