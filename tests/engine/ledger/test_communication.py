"""Communication per step, derived by hand from ring-collective volumes.

A rank sends 2(n − 1)/n · S for an all-reduce of S bytes over n ranks and (n − 1)/n · S
for an all-gather or reduce-scatter (nccl-tests ``doc/PERFORMANCE.md``). Llama-3.1-8B
has P = 8,030,261,248 parameters; the default plan (FSDP2, autocast) gathers them in
bf16 (S_w = 2P = 16,060,522,496 B) and reduces fp32 gradients (S_g = 4P =
32,121,044,992 B).
"""

from __future__ import annotations

from typing import Any

from engine.estimate import estimate
from engine.ledger.nodes.communication import Communication, stage_communication, step_communication
from engine.plan import default_plan, with_values
from engine.stacks.defaults import resolved

P = 8_030_261_248
S_W, S_G = 2 * P, 4 * P


def _comm(**changes: Any) -> Communication:
    return step_communication(resolved(with_values(default_plan(), changes)))


def _by_what(c: Communication) -> dict[str, tuple[int, int, int]]:
    return {t.what: (t.times, t.intra, t.inter) for t in c.transfers}


def test_fsdp2_on_one_node_gathers_twice_and_reduce_scatters() -> None:
    """FSDP2 over DP 8 inside one node: forward and backward all-gathers of S_w, one
    reduce-scatter of S_g per micro-batch; each sends 7/8 of its tensor: 14,052,957,184
    and 28,105,914,368 B, all on NVLink. Floor: 56,211,828,736 B ÷ 450 GB/s."""
    c = _comm()
    got = _by_what(c)
    assert got["parameters for forward"] == (1, S_W * 7 // 8, 0)
    assert got["parameters for backward"] == (1, S_W * 7 // 8, 0)
    assert got["gradients"] == (1, S_G * 7 // 8, 0)
    assert c.intra_bytes == 2 * (S_W * 7 // 8) + S_G * 7 // 8
    assert c.inter_bytes == 0
    assert abs(c.floor_seconds - c.intra_bytes / 450e9) < 1e-12


def test_what_zero3_adds_over_ddp_and_accumulation() -> None:
    """DDP all-reduces the fp32 gradients: 2 · 7/8 · S_g = 56,211,828,736 B — as many
    bytes as FSDP2's two gathers and one reduce-scatter here (bf16 gathers, fp32 grads).
    With grad_accum 4 DDP syncs every micro-batch (4×) unless no_sync; FSDP2 gathers
    4× either way and reduce-scatters once under no_sync."""
    ddp = _by_what(_comm(**{"parallelism.strategy": "ddp"}))
    assert ddp == {"gradients": (1, 2 * S_G * 7 // 8, 0)}
    ga = {"batch.grad_accum": 4}
    assert _by_what(_comm(**{"parallelism.strategy": "ddp"}, **ga))["gradients"][0] == 4
    no_sync = {**ga, "parallelism.knobs.accumulate_without_sync": True}
    assert _by_what(_comm(**{"parallelism.strategy": "ddp"}, **no_sync))["gradients"][0] == 1
    fsdp = _by_what(_comm(**no_sync))
    assert fsdp["parameters for forward"][0] == 4 and fsdp["gradients"][0] == 1


def test_two_nodes_split_by_link_class() -> None:
    """DDP over DP 16 on two nodes of 8: a two-level all-reduce moves 2 · 7/8 · S_g inside
    each node and, over the network, 2 · 1/2 · S_g ÷ 8 (each of the node's 8 NICs one
    eighth) = 4,015,130,624 B. HSDP (shard 8, replicate 2) keeps the gathers and the
    reduce-scatter on NVLink and all-reduces the 1/8 gradient shard across the pair:
    2 · 1/2 · S_g / 8 = 4,015,130,624 B on the network."""
    ddp = _comm(**{"parallelism.strategy": "ddp", "parallelism.dp": 16})
    assert _by_what(ddp)["gradients"] == (1, 2 * S_G * 7 // 8, S_G // 8)
    assert ddp.floor_seconds == max(ddp.intra_seconds, ddp.inter_seconds)
    hsdp = _by_what(_comm(**{"parallelism.strategy": "fsdp2_hsdp", "parallelism.dp": 16}))
    assert hsdp["gradients"] == (1, S_G * 7 // 8, 0)
    assert hsdp["gradient shards"] == (1, 0, S_G // 8)


def test_nvlink_against_pcie() -> None:
    """The same bytes at a PCIe Gen4 x16 link (32 GB/s each way) take 450/32 ≈ 14× the
    NVLink floor."""
    nv = _comm()
    pcie = _comm(**{"hardware.intra_node_gbps": 32.0})
    assert pcie.intra_bytes == nv.intra_bytes
    assert abs(pcie.floor_seconds / nv.floor_seconds - 450 / 32) < 1e-9


def test_tensor_parallel_activations() -> None:
    """TP 2 × DP 4: each of the 32 layers all-reduces its 4096 × 4096 bf16 activations
    (33,554,432 B) twice in forward and twice in backward; over 2 ranks one sends
    2 · 1/2 · S = S: 128 × 33,554,432 = 4,294,967,296 B. Full recompute adds two per
    layer: 192 ×."""
    tp = _by_what(_comm(**{"parallelism.tp": 2, "parallelism.dp": 4}))
    assert tp["layer activations (TP)"] == (128, 128 * 33_554_432, 0)
    rec = _by_what(
        _comm(**{"parallelism.tp": 2, "parallelism.dp": 4, "method.recompute.policy": "full"})
    )
    assert rec["layer activations (TP)"][0] == 192


def test_estimate_carries_communication_and_the_batch_identity() -> None:
    """Views get the section and micro × GA × DP = global; the search's estimate skips
    the section (it needs only the verdict)."""
    plan = with_values(default_plan(), {"batch.grad_accum": 4})
    est = estimate(plan)
    assert est.nodes.communication is not None
    assert est.batch.global_batch == 1 * 4 * 8 and est.batch.tokens_per_step == 32 * 4096
    assert "= global batch 32 sequences" in est.batch.identity()
    assert estimate(plan, decisive_only=True).nodes.communication is None


def test_gathered_logits_are_all_gathered_once_per_micro_batch() -> None:
    """replicated_embedding (transformers' ``lm_head: colwise_rep``): each TP rank
    computes V ÷ 2 of the logits and all-gathers the full 4096 tokens × 128,256 vocab ×
    2 B (bf16) = 1,050,673,152 B tensor; over 2 ranks one sends 1/2 · S = 525,336,576 B,
    once per micro-batch (grad_accum 3: 3×), on NVLink. vocab_parallel keeps the logits
    split (no gather); replicated computes them whole on every rank (no gather either)."""
    tp = {"parallelism.tp": 2, "parallelism.dp": 4, "batch.grad_accum": 3}
    got = _by_what(_comm(**tp, **{"parallelism.tp_style": "replicated_embedding"}))
    assert got["gathered logits (TP)"] == (3, 3 * 525_336_576, 0)
    for style in ("vocab_parallel", "replicated"):
        assert "gathered logits (TP)" not in _by_what(
            _comm(**tp, **{"parallelism.tp_style": style})
        )
    assert "gathered logits (TP)" not in _by_what(
        _comm(**{"parallelism.tp_style": "replicated_embedding"})  # TP 1: no group
    )


def test_only_the_stage_holding_the_head_gathers_logits() -> None:
    """Under PP 2 the output layer sits on the last stage: stage 0 gathers nothing."""
    plan = resolved(
        with_values(
            default_plan(),
            {
                "parallelism.tp": 2,
                "parallelism.pp": 2,
                "parallelism.dp": 2,
                "parallelism.tp_style": "replicated_embedding",
                "batch.grad_accum": 2,
            },
        )
    )
    first = {t.what for t in stage_communication(plan, 0)}
    last = {t.what: t.times for t in stage_communication(plan, 1)}
    assert "gathered logits (TP)" not in first and last["gathered logits (TP)"] == 2
