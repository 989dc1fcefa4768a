"""Offload placements and the host-RAM, NVMe and checkpoint ledgers, by hand."""

from __future__ import annotations

from typing import Any

import pytest
from ledger_plans import SMOL, make_plan

from engine.errors import PlanError
from engine.estimate import estimate
from engine.ledger.nodes.ledgers import NodeLedgers
from engine.ledger.nodes.ledgers import node_ledgers as _node_ledgers
from engine.plan import Plan
from engine.reference.deepspeed_estimator import zero2, zero3
from engine.stacks.defaults import resolved
from engine.units import GiB

P8B = 8_030_261_248
ZERO3_BF16 = {
    "parallelism__strategy": "zero3",
    "method__precision__policy": "amp_master",
    "method__precision__grad_dtype": "bf16",
    "parallelism__knobs__ds_param_persistence_threshold": 0,
    "runtime__allocation_granularity_bytes": 1,
}


def node_ledgers(plan: Plan) -> NodeLedgers:
    """The node ledgers of a plan as the engine computes it (stack defaults resolved)."""
    return _node_ledgers(resolved(plan))


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        (
            {"parallelism__strategy": "ddp", "offload__optimizer": "cpu"},
            "DDP keeps every state on the GPU",
        ),
        ({"offload__optimizer": "cpu"}, "set offload.params to cpu"),
        ({"offload__params": "nvme"}, "FSDP offloads to the CPU only"),
        (
            {
                "parallelism__strategy": "zero2",
                "offload__params": "cpu",
                "offload__optimizer": "cpu",
            },
            "offload.params needs ZeRO stage 3",
        ),
        (
            {"parallelism__strategy": "zero2", "offload__optimizer": "nvme"},
            "needs parallelism.strategy zero3",
        ),
        (
            {"parallelism__strategy": "megatron_distopt", "offload__optimizer": "nvme"},
            "CPU only, not NVMe",
        ),
        (
            {
                "parallelism__strategy": "megatron_distopt",
                "offload__params": "cpu",
                "offload__optimizer": "cpu",
            },
            "does not offload parameters",
        ),
    ],
)
def test_invalid_offload_combinations_are_refused(changes: dict[str, Any], message: str) -> None:
    with pytest.raises(PlanError, match=message):
        estimate(make_plan(**changes))


def test_zero3_cpu_offload_moves_states_to_host_by_hand() -> None:
    """Llama-3.1-8B, ZeRO-3, bf16 working weights + fp32 master, params and optimizer on
    the CPU, 8 ranks on one node, no rounding, threshold 0. Per rank partition
    P/8 = 1,003,782,656 elements. Host per node (× 8 ranks), DeepSpeed 0.19.6
    stage3.py: 16-bit params 2 B → 2P = 16,060,522,496; the 16-bit
    grad_partitions_flat_buffer 2P (not fp32); the sub-groups' fp32 gradient buffers
    4P; master 4P; exp_avg 4P; exp_avg_sq 4P; step 8 × 4 B (one flat buffer per rank).
    HBM keeps no persistent model state (the IPG bucket is a buffer)."""
    est = estimate(make_plan(offload__params="cpu", offload__optimizer="cpu", **ZERO3_BF16))
    states = {"weights", "gradients", "optimizer"}
    assert [r for r in est.rows if r.kind == "persistent" and r.group in states] == []
    assert not any(r.id == "hbm.optimizer_step.temporaries" for r in est.rows)

    host = {r.id: r.high for r in est.nodes.host}
    assert host["host.offload.weights"] == 2 * P8B
    assert host["host.offload.grads"] == 2 * P8B
    assert host["host.offload.fp32_grad_partition"] == 4 * P8B
    assert host["host.offload.master_weights"] == 4 * P8B
    assert host["host.offload.optimizer.exp_avg"] == 4 * P8B
    assert host["host.offload.optimizer.step"] == 8 * 4


@pytest.mark.parametrize(
    ("params", "accum", "per_param"), [("cpu", 1, 8), ("cpu", 4, 8), ("none", 1, 6), ("none", 4, 6)]
)
def test_deepspeed_zero3_pinned_memory_follows_the_code(
    params: str, accum: int, per_param: int
) -> None:
    """ZeRO-3 offload, pinned host bytes per parameter (DeepSpeed 0.19.6 stage3.py):
    the 16-bit gradient buffer 2 B (_setup_for_real_optimizer pins
    grad_partitions_flat_buffer) + the sub-groups' fp32 gradients 4 B
    (initialize_optimizer_states), + the offloaded 16-bit parameters 2 B
    (param_groups_fp16_flat_cpu_memory); the fp32 master is a pageable clone.
    Gradients accumulate in the flat buffer, so grad_accum adds nothing — the docs'
    "+2 B with gradient accumulation" has no buffer behind it in this code."""
    n = node_ledgers(
        make_plan(
            offload__params=params, offload__optimizer="cpu", batch__grad_accum=accum, **ZERO3_BF16
        )
    )
    assert n.pinned == per_param * P8B


def test_fsdp2_cpu_offload_policy_host_rows() -> None:
    """FSDP2 CPUOffloadPolicy(pin_memory=True) over 8 ranks: fp32 sharded params and
    gradient shards pinned (_fsdp_collectives.py foreach_reduce copies each shard into
    pinned memory), AdamW moments pageable: 4P each per node; pinned 8P. The step runs
    on the CPU with torch.optim's CPU default, the for-loop (no foreach copy); with
    foreach set it adds one fp32 copy of the shard per rank, 4P per node, in the
    optimizer phase only."""
    n = node_ledgers(make_plan(offload__params="cpu", runtime__allocation_granularity_bytes=1))
    host = {r.id: r for r in n.host}
    assert host["host.offload.weights"].high == 4 * P8B
    assert host["host.offload.weights"].group == "offload (pinned)"
    assert host["host.offload.grads"].high == 4 * P8B
    assert host["host.offload.grads"].pinned
    assert "host.optimizer_step_temp" not in host
    assert n.pinned == 8 * P8B
    foreach = node_ledgers(
        make_plan(
            offload__params="cpu",
            runtime__allocation_granularity_bytes=1,
            method__optimizer__implementation="foreach",
        )
    )
    temp = next(r for r in foreach.host if r.id == "host.optimizer_step_temp")
    assert temp.high == 4 * P8B and temp.phases == frozenset({"optimizer"})


def test_zero_infinity_nvme_rows_and_swap_buffers() -> None:
    """ZeRO-Infinity, optimizer and params on NVMe, 8 ranks per node. NVMe per node:
    16-bit params 2P, master 4P, moments 4P + 4P, the swapped sub-groups' fp32
    gradients 4P (partitioned_optimizer_swapper.py swap_out_gradients), step 8 × 4 B.
    Host keeps the 16-bit gradient buffer 2P (pinned), one fp32 gradient buffer of the
    largest sub-group per rank (the whole P/8 here: 4P) and the swap buffers:
    optimizer 4 buffers × min(1e9, P/8 = 1,003,782,656) × 4 B × 8 ranks =
    128,000,000,000 B; params 5 × 1e8 × 2 B × 8 = 8,000,000,000 B."""
    n = node_ledgers(make_plan(offload__params="nvme", offload__optimizer="nvme", **ZERO3_BF16))
    nvme = {r.id: r.high for r in n.nvme}
    assert nvme["nvme.offload.weights"] == 2 * P8B
    assert nvme["nvme.offload.master_weights"] == 4 * P8B
    assert nvme["nvme.offload.fp32_grad_partition"] == 4 * P8B
    assert sum(nvme.values()) == 18 * P8B + 32
    host = {r.id: r.high for r in n.host}
    assert host["host.offload.grads"] == 2 * P8B
    assert host["host.offload.fp32_grad_buffer"] == 4 * P8B
    assert host["host.nvme_swap.optimizer"] == 128_000_000_000
    assert host["host.nvme_swap.params"] == 8_000_000_000


def test_checkpoint_size_and_retention_default_plan() -> None:
    """Default plan (fp32 params are the master, AdamW): one checkpoint = weights 4P =
    32,121,044,992 B + optimizer 8P + 291 step counters × 4 B = 64,242,091,148 B + RNG
    and scheduler 8 ranks × 8 KiB = 65,536 B → 96,363,201,676 B. Three kept: two older
    ones on disk plus the one being written while saving (a peak)."""
    rows = {r.id: r.high for r in node_ledgers(make_plan()).checkpoint}
    one = 32_121_044_992 + 64_242_091_148 + 65_536
    assert rows["checkpoint.weights"] == 32_121_044_992
    assert rows["checkpoint.optimizer"] == 64_242_091_148
    assert rows["checkpoint.retained"] == 2 * one
    assert rows["checkpoint.in_flight"] == one


def test_lora_checkpoint_holds_adapters_only() -> None:
    """LoRA r16 on q, k, v, o of SmolLM-135M: 1,843,200 fp32 adapter params = 7,372,800 B
    of weights; the frozen base is not saved."""
    rows = {
        r.id: r.high
        for r in node_ledgers(make_plan(model__architecture=SMOL, method__kind="lora")).checkpoint
    }
    assert rows["checkpoint.weights"] == 7_372_800


def test_checkpoints_on_local_nvme_move_to_the_nvme_ledger() -> None:
    """Sharded checkpoints on local NVMe, one node of 8 ranks: the node keeps 3 × the
    whole checkpoint plus one in flight; the shared file system keeps none."""
    n = node_ledgers(make_plan(checkpoint__location="local_nvme"))
    one = 32_121_044_992 + 64_242_091_148 + 65_536
    nvme = {r.id: r.high for r in n.nvme}
    assert nvme["nvme.checkpoints.retained"] == 3 * one
    assert nvme["nvme.checkpoints.in_flight"] == one
    assert "checkpoint.retained" not in {r.id for r in n.checkpoint}


def test_a_plan_that_fits_hbm_but_not_host_ram_does_not_fit() -> None:
    est = estimate(make_plan(hardware__host_ram_bytes_per_node=64 * GiB))
    assert est.verdict == "does_not_fit"
    assert "host RAM per node" in est.verdict_reason


def test_transfers_lower_bound_and_verdicts() -> None:
    """ZeRO-3 params + optimizer on the CPU, grad_accum 1, 8 ranks. Per rank:
    gradients 2 B × P/8 + updated params 2 B × P/8 + parameter fetch 2 passes × 2 B ×
    P/8 = 8 B × 1,003,782,656 = 8,030,261,248 B. At 25 GB/s: 0.3212 s. A 0.1 s target
    is exceeded; with no bandwidth entered, throughput is not shown."""
    base = {"offload__params": "cpu", "offload__optimizer": "cpu", **ZERO3_BF16}
    t = node_ledgers(make_plan(**base)).transfers
    assert t.device_host_bytes_per_rank == 8 * P8B // 8
    assert t.verdict == "capacity fits — throughput not shown"
    t = node_ledgers(
        make_plan(hardware__host_link_gbps=25.0, offload__step_time_target_s=0.1, **base)
    ).transfers
    assert t.device_host_seconds == pytest.approx(8_030_261_248 / 25e9)
    assert t.verdict == "transfer alone exceeds the step-time target"


def test_deepspeed_cold_estimator_reference_t5_3b_table() -> None:
    """DeepSpeed PR #1536 printed, for t5-3b ("2851M total params, 32M largest layer
    params") on 1 node × 8 GPUs, in GiB (its "GB" divides by 2^30):
      ZeRO-3 offload params+optimizer: host 71.71 (zero_init) / 127.48, GPU 0.12
      ZeRO-3 offload optimizer: host 63.74 (zero_init), GPU 0.79
      ZeRO-2 offload: host 127.48, GPU 5.31; no offload: host 127.48, GPU 15.93
    The exact counts were not printed; P = 2,851.6M and largest = 32.6M reproduce every
    figure to the printed 0.01 GiB (host 18·1.5·P, 48·P, 24·P; GPU 4·largest,
    4·largest + 2P/8, 2P) but the last: that printout used 4P + 16P/8, which
    estimate_zero2_model_states_mem_needs replaced by 2P + 18P/8 in 2024 — 11.29 GiB."""
    p, big = 2_851_600_000, 32_600_000

    def gib(x: int) -> float:
        return round(x / GiB, 2)

    cpu, gpu, _ = zero3(p, big, 8, 1, True, True, True)
    assert (gib(cpu), gib(gpu)) == (71.71, 0.12)
    cpu, _, _ = zero3(p, big, 8, 1, True, True, False)
    assert gib(cpu) == 127.48
    cpu, gpu, _ = zero3(p, big, 8, 1, True, False, True)
    assert (gib(cpu), gib(gpu)) == (63.74, 0.79)
    cpu, gpu, _ = zero2(p, 8, 1, True)
    assert (gib(cpu), gib(gpu)) == (127.48, 5.31)
    cpu, gpu, _ = zero2(p, 8, 1, False)
    assert (gib(cpu), gib(gpu)) == (127.48, 11.29)
