"""Host RAM per node: offloaded state, staging buffers, loading, checkpoints, processes.

Every row is per node (the busiest one), so it compares directly with the node's RAM.
Each says how it scales: per rank × ranks on the node, or once per node.
"""

from __future__ import annotations

from engine.ledger.nodes.checkpoint_storage import checkpoint_size
from engine.ledger.nodes.node_view import NodeView
from engine.ledger.nodes.whole_model import base_param_count
from engine.ledger.row import CHECKPOINT, OPTIMIZER, Row, make_row
from engine.ledger.states.moved import offload_group
from engine.plan import Plan
from engine.stacks.families import rule_of
from engine.units import fmt_count

STORED_BYTES = {"fp32": 4, "bf16": 2, "fp16": 2, "fp8_e4m3": 1}


def per_node(row: Row, ranks: int) -> Row:
    """A per-rank row scaled to the node: × ranks on the node."""
    return row._replace(
        low=row.low * ranks,
        high=row.high * ranks,
        scope="node",
        formula_src=lambda: f"{ranks} ranks × ({row.formula})",
    )


def _buffers(plan: Plan, v: NodeView) -> list[Row]:
    off, r = plan.offload, v.ranks_per_node
    rows = []
    pin = off.pin_memory
    if off.optimizer == "nvme":
        elems = min(off.sub_group_size, v.trainable_shard_elems)
        n = off.optimizer_buffer_count * elems * 4 * r
        rows.append(
            make_row(
                id="host.nvme_swap.optimizer",
                label="NVMe swap buffers (optimizer)",
                state="swap_buffers",
                location="host",
                kind="persistent",
                group=offload_group(pin),
                low=n,
                high=n,
                formula=f"{r} ranks × {off.optimizer_buffer_count} buffers × min(sub_group_size "
                f"{fmt_count(off.sub_group_size)}, shard {fmt_count(v.trainable_shard_elems)}) "
                f"elements × 4 B (fp32) = {fmt_count(n)} B",
                source="deepspeed-offload",
                scope="node",
                pinned=pin,
            )
        )
    if off.params == "nvme":
        n = off.param_buffer_count * off.param_buffer_elements * 2 * r
        rows.append(
            make_row(
                id="host.nvme_swap.params",
                label="NVMe swap buffers (parameters)",
                state="swap_buffers",
                location="host",
                kind="persistent",
                group=offload_group(pin),
                low=n,
                high=n,
                formula=f"{r} ranks × {off.param_buffer_count} buffers × "
                f"{fmt_count(off.param_buffer_elements)} elements × 2 B (16-bit) = "
                f"{fmt_count(n)} B",
                source="deepspeed-offload",
                scope="node",
                pinned=pin,
            )
        )
    return rows


def _cpu_step_temp(plan: Plan, v: NodeView) -> list[Row]:
    """torch optimizers stepping on the CPU (FSDP offload, Megatron) with foreach make
    one state-dtype copy of the parameters; DeepSpeedCPUAdam updates in place."""
    rule, impl = rule_of(plan.parallelism.strategy), plan.method.optimizer.implementation
    on_cpu = plan.offload.optimizer == "cpu" or plan.offload.params == "cpu"
    if not on_cpu or impl != "foreach" or not (rule.fsdp or rule.family == "megatron"):
        return []
    n = v.trainable_shard_elems * 4 * v.ranks_per_node
    return [
        make_row(
            id="host.optimizer_step_temp",
            label="CPU optimizer step temporaries (foreach)",
            state="optimizer_step",
            location="host",
            kind="peak",
            group="temporaries",
            low=n,
            high=n,
            formula=f"{v.ranks_per_node} ranks × {fmt_count(v.trainable_shard_elems)} trainable "
            f"shard elements × 4 B (one fp32 copy, _foreach_sqrt) = {fmt_count(n)} B",
            source="torch-adamw",
            phases=OPTIMIZER,
            scope="node",
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
    return make_row(
        id="host.checkpoint_event",
        label="Model load / checkpoint save (larger of the two)",
        state="checkpoint",
        location="host",
        kind="peak",
        group="checkpoint",
        low=low,
        high=high,
        formula=f"max(load: {load_words}; save: {save_words})",
        source="torch-dcp",
        phases=CHECKPOINT,
        scope="node",
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
            make_row(
                id="host.dataloader",
                label="Data-loader workers",
                state="processes",
                location="host",
                kind="persistent",
                group="processes",
                low=workers * h.dataloader_worker_bytes.low,
                high=workers * h.dataloader_worker_bytes.high,
                formula=f"{r} ranks × {h.dataloader_workers_per_rank} workers × "
                f"{fmt_count(h.dataloader_worker_bytes.low)}–"
                f"{fmt_count(h.dataloader_worker_bytes.high)} B",
                source="host-assumption",
                scope="node",
            )
        )
    rows.append(
        make_row(
            id="host.processes",
            label="Training processes (Python, CUDA libraries)",
            state="processes",
            location="host",
            kind="persistent",
            group="processes",
            low=r * h.process_rss_bytes.low,
            high=r * h.process_rss_bytes.high,
            formula=f"{r} ranks × {fmt_count(h.process_rss_bytes.low)}–"
            f"{fmt_count(h.process_rss_bytes.high)} B resident",
            source="host-assumption",
            scope="node",
        )
    )
    rows.append(
        make_row(
            id="host.os_reserve",
            label="Operating system reserve",
            state="processes",
            location="host",
            kind="persistent",
            group="processes",
            low=h.os_reserve_bytes,
            high=h.os_reserve_bytes,
            formula=f"{fmt_count(h.os_reserve_bytes)} B kept free (input)",
            source="host-assumption",
            scope="node",
        )
    )
    return rows


def pinned_bytes(rows: list[Row]) -> int:
    """Page-locked bytes among the host rows (must fit ``ulimit -l``)."""
    return sum(r.high for r in rows if r.pinned)
