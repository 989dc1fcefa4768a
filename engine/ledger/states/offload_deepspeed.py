"""DeepSpeed ZeRO-Offload and ZeRO-Infinity: where each state goes, and the buffers the
offload path adds (DeepSpeed 0.19.6).

ZeRO-1/2 (runtime/zero/stage_1_and_2.py ``__init__``, ``initialize_optimizer_states``):
the fp32 master partition ``single_partition_of_fp32_groups`` and its fp32 gradient are
pinned host tensors, and so is a 16-bit copy of the partition
(``param_buffer_of_bit16_for_cpu_offload_groups``); gradients reach the host through
``temp_grad_buffer_for_cpu_offload`` (pinned) from ``temp_grad_buffer_for_gpu_offload``
(HBM, kept), each the largest parameter in the model dtype; with gradient accumulation,
``accumulated_grads_in_cpu`` keeps a pinned 16-bit copy of each of the partition's
parameters' whole gradient. The moments (DeepSpeedCPUAdam's ``zeros_like``) are
pageable. ZeRO-2's 16-bit gradient partition no longer exists on the GPU; ZeRO-1's full
gradients stay until the boundary's reduce.

ZeRO-3 (runtime/zero/stage3.py): ``grad_partitions_flat_buffer`` (16-bit) lives on the
offload device, pinned; the fp32 master is a plain ``clone`` (pageable); each sub-group
gets a pinned fp32 gradient buffer (``initialize_optimizer_states``). Under
ZeRO-Infinity the master, the moments and the fp32 gradients of swapped sub-groups are
on NVMe (swap_tensor/partitioned_optimizer_swapper.py ``swap_out_gradients``), one fp32
gradient buffer of the largest sub-group stays on the host, and offloaded parameters'
16-bit partitions are pinned (``param_groups_fp16_flat_cpu_memory``). Gradients
accumulate in the flat buffer itself: no accumulation copy.
"""

from __future__ import annotations

from engine.ledger.held import HeldTensor
from engine.ledger.precision import DTYPE_BYTES
from engine.ledger.row import ALL_PHASES, Location, Row, make_row
from engine.ledger.states.allocs import shard_allocs
from engine.ledger.states.moved import OFFLOAD_CLASS, move, offload_group
from engine.plan import Plan
from engine.stacks.families import StrategyRule
from engine.units import fmt_count, round_up

FP32 = 4


def _buffer(
    row_id: str,
    label: str,
    location: Location,
    n: int,
    pinned: bool,
    formula: str,
    source: str,
    low: int | None = None,
) -> Row:
    pinned = pinned and location == "host"
    return make_row(
        id=row_id,
        label=label,
        state="buckets" if location == "hbm" else "swap_buffers",
        location=location,
        kind="persistent",
        group="buckets" if location == "hbm" else offload_group(pinned),
        low=n if low is None else low,
        high=n,
        formula=formula,
        source=source,
        phases=ALL_PHASES,
        pinned=pinned,
    )


def deepspeed_offload(
    rows: list[Row], plan: Plan, held: list[HeldTensor], rule: StrategyRule
) -> tuple[list[Row], list[Row]]:
    """(rows that stay in HBM, per-rank rows on host / NVMe) under ZeRO offload."""
    off = plan.offload
    pin = off.pin_memory
    trainable = [t for t in held if t.trainable]
    gran = plan.runtime.allocation_granularity_bytes
    allocs = shard_allocs(trainable, rule.optimizer, rule, "grad_dtype")
    shard = sum(a.numel * a.copies for a in allocs)
    gbytes = max((DTYPE_BYTES[a.dtype] for a in allocs), default=2)
    largest = max((t.numel for t in trainable), default=0)
    opt_loc: Location = "nvme" if off.optimizer == "nvme" else "host"
    stay: list[Row] = []
    moved: list[Row] = []
    for r in rows:
        cls = OFFLOAD_CLASS.get(r.state)
        if cls is None or (cls == "optimizer" and off.optimizer == "none"):
            stay.append(r)
        elif cls == "params":
            if off.params == "none":
                stay.append(r)
            else:
                loc: Location = "nvme" if off.params == "nvme" else "host"
                moved.append(move(r, loc, pin, source="deepspeed-zero3-offload"))
        elif cls == "optimizer":
            master_pinned = pin and not rule.params and r.state == "master"
            src = "deepspeed-zero3-offload" if rule.params else "deepspeed-zero12-offload"
            moved.append(move(r, opt_loc, master_pinned, source=src))
        elif rule.params and off.optimizer == "none":
            # parameter-only offload: stage3.py offloads gradients only with the
            # optimizer (``if self.offload_optimizer``), so the partition stays in HBM
            stay.append(r)
        elif rule.params:  # ZeRO-3: the 16-bit gradient buffer lives on the host
            why = " (grad_partitions_flat_buffer)"
            moved.append(move(r, "host", pin, why=why, source="deepspeed-zero3-offload"))
        elif not rule.grads and r.kind == "persistent":
            stay.append(r)  # ZeRO-1: full 16-bit gradients until the boundary's reduce
        # ZeRO-1's gradient partition (a peak row) goes to the host's fp32 one below
        # ZeRO-2: no 16-bit gradient partition on the GPU; the fp32 one is below
    if not trainable or off.optimizer == "none":
        return stay, moved
    if rule.params:
        moved += _zero3_buffers(plan, shard, largest, gran, pin)
    else:
        hbm, host = _zero12_buffers(plan, shard, largest, gbytes, gran, pin)
        stay += hbm
        moved += host
    return stay, moved


def _zero12_buffers(
    plan: Plan, shard: int, largest: int, gbytes: int, gran: int, pin: bool
) -> tuple[list[Row], list[Row]]:
    src = "deepspeed-zero12-offload"
    fp32 = round_up(shard * FP32, gran)
    bit16 = round_up(shard * gbytes, gran)
    stage = round_up(largest * gbytes, gran)
    host = [
        _buffer(
            "host.offload.fp32_grad_partition",
            "fp32 gradient partition (single_partition_of_fp32_groups[i].grad)",
            "host",
            fp32,
            pin,
            f"per rank: {fmt_count(shard)} partition el. × 4 B = {fmt_count(fp32)} B",
            src,
        ),
        _buffer(
            "host.offload.bit16_partition",
            "16-bit partition copy (param_buffer_of_bit16_for_cpu_offload_groups)",
            "host",
            bit16,
            pin,
            f"per rank: {fmt_count(shard)} partition el. × {gbytes} B = {fmt_count(bit16)} B",
            src,
        ),
        _buffer(
            "host.offload.grad_staging",
            "Gradient staging buffer (temp_grad_buffer_for_cpu_offload)",
            "host",
            stage,
            pin,
            f"per rank: the largest parameter {fmt_count(largest)} el. × {gbytes} B = "
            f"{fmt_count(stage)} B",
            src,
        ),
    ]
    if plan.batch.grad_accum > 1:
        low = round_up(shard * gbytes, gran)
        high = round_up((shard + 2 * largest) * gbytes, gran)
        host.append(
            _buffer(
                "host.offload.accumulated_grads",
                "Accumulated gradients (accumulated_grads_in_cpu)",
                "host",
                high,
                pin,
                f"per rank, grad_accum {plan.batch.grad_accum} > 1: the whole gradient of "
                f"each parameter in the partition × {gbytes} B: {fmt_count(shard)} el. up to "
                f"+ 2 boundary parameters of {fmt_count(largest)} = {fmt_count(low)}–"
                f"{fmt_count(high)} B",
                src,
                low=low,
            )
        )
    hbm = [
        _buffer(
            "hbm.offload.grad_staging",
            "Gradient staging buffer on the GPU (temp_grad_buffer_for_gpu_offload)",
            "hbm",
            stage,
            False,
            f"the largest parameter {fmt_count(largest)} el. × {gbytes} B = {fmt_count(stage)} "
            "B, kept for the step",
            src,
        )
    ]
    return hbm, host


def _zero3_buffers(plan: Plan, shard: int, largest: int, gran: int, pin: bool) -> list[Row]:
    src = "deepspeed-zero3-offload"
    fp32 = round_up(shard * FP32, gran)
    if plan.offload.optimizer != "nvme":
        return [
            _buffer(
                "host.offload.fp32_grad_partition",
                "fp32 gradient buffers of the sub-groups (pinned)",
                "host",
                fp32,
                pin,
                f"per rank: {fmt_count(shard)} partition el. × 4 B = {fmt_count(fp32)} B",
                src,
            )
        ]
    sub = min(shard, plan.offload.sub_group_size + largest)
    one = round_up(sub * FP32, gran)
    return [
        _buffer(
            "nvme.offload.fp32_grad_partition",
            "fp32 gradients of the swapped sub-groups",
            "nvme",
            fp32,
            False,
            f"per rank: {fmt_count(shard)} partition el. × 4 B = {fmt_count(fp32)} B "
            "(swap_out_gradients)",
            src,
        ),
        _buffer(
            "host.offload.fp32_grad_buffer",
            "fp32 gradient buffer of the largest sub-group",
            "host",
            one,
            False,
            f"per rank: min(partition, sub_group_size + one partition) {fmt_count(sub)} el. "
            f"× 4 B = {fmt_count(one)} B",
            src,
        ),
    ]
