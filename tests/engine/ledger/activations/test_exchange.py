"""CP K/V exchange and EP all-to-all buffers (``hbm.comm.*``), derived by hand.

Following TransformerEngine ``context_parallel.py`` ``AttnFuncWithCPAndKVP2P.forward``
(``p2p_comm_buffers``), PyTorch ``context_parallel`` (``_RotateMethod.ALL_GATHER``) and
Megatron ``moe/token_dispatcher.py`` ``MoEAlltoAllTokenDispatcher.token_dispatch``.
"""

from __future__ import annotations

from typing import Any

from engine.estimate import estimate
from engine.ledger.row import Row
from engine.plan import Plan, default_plan, with_values
from engine.presets import plan_for_model_preset


def _row(plan: Plan, rid: str) -> Row | None:
    return next((r for r in estimate(plan).rows if r.id == rid), None)


def _llama(**changes: Any) -> Plan:
    return with_values(
        default_plan(),
        {"runtime.allocation_granularity_bytes": 1, **changes},
    )


def test_cp_p2p_ring_holds_two_to_cp_chunks() -> None:
    """Llama-3.1-8B, s = 8192 on CP 4, Megatron: the local chunk is 2048 tokens of
    8 KV heads × (128 K + 128 V) bf16 = 2048 × 8 × 256 × 2 = 8,388,608 B; the ring keeps
    2 (computing, arriving) to 4 (none freed) of them: 16,777,216–33,554,432 B."""
    plan = _llama(
        **{
            "batch.seq_len": 8192,
            "parallelism.cp": 4,
            "parallelism.dp": 2,
            "parallelism.strategy": "megatron_distopt",
        }
    )
    r = _row(plan, "hbm.comm.cp_kv")
    assert r is not None and r.source == "te-context-parallel"
    assert (r.low, r.high) == (2 * 8_388_608, 4 * 8_388_608)
    assert "forward" in r.phases and "backward.layers" in r.moments


def test_cp_all_gather_holds_the_whole_sequence() -> None:
    """FSDP2 (torchtitan): all-gather of K/V: 4 chunks = the whole 8192-token sequence,
    exact: 8192 × 8 × 256 × 2 = 33,554,432 B. TP 2 halves the KV heads per rank."""
    plan = _llama(**{"batch.seq_len": 8192, "parallelism.cp": 4, "parallelism.dp": 2})
    r = _row(plan, "hbm.comm.cp_kv")
    assert r is not None and r.low == r.high == 33_554_432
    tp2 = _llama(
        **{"batch.seq_len": 8192, "parallelism.cp": 4, "parallelism.dp": 1, "parallelism.tp": 2}
    )
    r2 = _row(tp2, "hbm.comm.cp_kv")
    assert r2 is not None and r2.high == 33_554_432 // 2
    assert _row(_llama(), "hbm.comm.cp_kv") is None


def test_ep_all_to_all_sends_and_receives_every_routed_token() -> None:
    """Mixtral-8x7B, s = 4096, micro-batch 1, EP 8 over DP 8: 4096 tokens × top-2 = 8192
    hidden rows of 4096 bf16 = 67,108,864 B sent and, balanced, as many received:
    134,217,728 B. A capacity factor of 1.25 lets a busy rank receive 25 % more."""
    base = {
        "parallelism.ep": 8,
        "parallelism.dp": 8,
        "runtime.allocation_granularity_bytes": 1,
    }
    plan = with_values(plan_for_model_preset("mixtral-8x7b"), base)
    r = _row(plan, "hbm.comm.ep_dispatch")
    assert r is not None and r.low == r.high == 2 * 67_108_864
    cf = with_values(plan, {"model.architecture.moe.capacity_factor": 1.25})
    r = _row(cf, "hbm.comm.ep_dispatch")
    assert r is not None and (r.low, r.high) == (2 * 67_108_864, 67_108_864 + 83_886_080)
    no_ep = with_values(plan, {"parallelism.ep": 1})
    assert _row(no_ep, "hbm.comm.ep_dispatch") is None
