"""Bytes moved per training step by offload, and the time they take at least.

Offload buys capacity; it never promises throughput. MemPlan reports the traffic and a
lower bound on its time when the user gives link bandwidths and a step-time target —
and says "capacity fits — throughput not shown" otherwise.
"""

from __future__ import annotations

from dataclasses import dataclass

from engine.ledger.nodes.node_view import NodeView
from engine.plan import Plan
from engine.stacks.families import rule_of
from engine.units import GB


@dataclass(frozen=True, slots=True)
class Transfers:
    """Per-step traffic and its lower-bound time."""

    device_host_bytes_per_rank: int
    host_nvme_bytes_per_node: int
    device_host_seconds: float | None
    host_nvme_seconds: float | None
    verdict: str
    lines: tuple[str, ...]


def step_transfers(plan: Plan, v: NodeView) -> Transfers:
    """Traffic per optimizer step implied by the offload placement (lower bounds)."""
    off, ga = plan.offload, plan.batch.grad_accum
    shard, train = v.param_shard_elems, v.trainable_shard_elems
    rule = rule_of(plan.parallelism.strategy)
    lines: list[str] = []
    d2h = 0
    nvme = 0
    if rule.fsdp and off.params == "cpu":
        fetch = 2 * ga * shard * 4
        grads = ga * train * 4
        d2h = fetch + grads
        lines.append(
            f"FSDP CPU offload: parameter shards host→device for forward and "
            f"backward of {ga} micro-batch(es) ({fetch:,} B) + gradient shards "
            f"device→host ({grads:,} B) per rank"
        )
    else:
        if off.optimizer != "none":
            grads = ga * train * 2
            params = train * 2
            d2h += grads + params
            lines.append(
                f"optimizer offload: 16-bit gradients device→host each micro-batch "
                f"({grads:,} B) + updated 16-bit parameters host→device ({params:,} B)"
                " per rank"
            )
        if off.params != "none":
            fetch = 2 * ga * shard * 2
            d2h += fetch
            lines.append(
                f"parameter offload: 16-bit partitions host→device for forward and "
                f"backward of {ga} micro-batch(es): {fetch:,} B per rank"
            )
        if off.optimizer == "nvme":
            states = 2 * train * 12 * v.ranks_per_node
            nvme += states
            lines.append(
                f"optimizer on NVMe: read and write fp32 master + moments once per "
                f"step: {states:,} B per node"
            )
        if off.params == "nvme":
            reads = 2 * ga * shard * 2 * v.ranks_per_node
            nvme += reads
            lines.append(f"parameters on NVMe: read for forward and backward: {reads:,} B per node")
    hw = plan.hardware
    t_dh = d2h / (hw.host_link_gbps * GB) if (hw.host_link_gbps and d2h) else None
    t_nv = nvme / (hw.nvme_gbps * GB) if (hw.nvme_gbps and nvme) else None
    if not (d2h or nvme):
        verdict = "no offload traffic"
    elif off.step_time_target_s is None or (t_dh is None and t_nv is None):
        verdict = "capacity fits — throughput not shown"
    else:
        worst = max(t for t in (t_dh, t_nv) if t is not None)
        verdict = (
            "transfer alone exceeds the step-time target"
            if worst > off.step_time_target_s
            else "transfers fit the step-time target (a lower bound, not a promise)"
        )
    return Transfers(d2h, nvme, t_dh, t_nv, verdict, tuple(lines))
