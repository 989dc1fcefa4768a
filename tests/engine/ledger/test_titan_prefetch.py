"""torchtitan's chunked loss: no FSDP2 prefetch in the decoder's backward; layer SAC every k.

Qwen3-30B-A3B layers (hidden 2048, 32 heads / 4 KV heads of 128, 128 experts of 768,
top-8), 2 or 4 of them, s 2048, local batch 1, FSDP2 × 8, bf16 gathered units — the
fidelity grid's case (``tests/trace/titan_grid.py``).

**No prefetch** (``engine/ledger/peaks/titan_prefetch.py``): ``ChunkedLossWrapper.__call__``
(torchtitan 0.3.0 ``components/loss.py``) runs ``chunk_loss.backward()`` per chunk inside
forward; each ends in FSDP2's ``_root_post_backward_final_callback`` (torch 2.13
``_fsdp_state.py``), whose ``finalize_backward`` clears every group's
``_post_forward_indices``, so ``FSDPParamGroup._backward_prefetch`` returns at once in
the decoder's backward and each layer gathers its own unit at its pre-backward.

One layer unit, flat (``foreach_all_gather``; every dim divisible by 8, no padding):
wqkv (4096 + 2·512)·2048 = 10,485,760, wo 2048·4096 = 8,388,608, q_norm / k_norm 128
each, attention_norm / ffn_norm 2048 each, router gate 128·2048 = 262,144, experts
3 × 128·768·2048 = 603,979,776 → 623,120,640 el. × 2 B = 1,246,241,280 B. At the
pre-backward it is live with the incoming residual gradient 2048·2048·2 = 8,388,608 B:
1,254,629,888 B — above the layer's working set at its experts' backward
(``titan_moe.py``: 8,388,608 + 2 × 67,108,864 + 25,165,824 + 1,207,959,552 − the freed
100,663,296 + 134,217,728 + 65,536 = 1,140,785,152 B, × 0.98 – 1.05), so the working-set
row is exactly it. Traced: 9,138,782,720 B at layer 0's pre-backward, inside the ledger's
9,130,687,948 – 9,158,969,472 (``docs/fidelity-grid.md``).

**Layer SAC every 2** (``distributed/activation_checkpoint.py``: ``ptd_checkpoint_wrapper``'s
counter starts at 1, block i checkpointed when (i + 1) % 2 == 0): of 4 layers the last
(3) is checkpointed, the second-last (2) and the first (0) are not. Only the last one's
backward recomputes its saved set (404,021,760 B, less its kept input 8,388,608 B); the
others' saved sets are the remaining-activation rows' already, so their working set is
the one above, with no recomputed layer (was counted with one: +3.43 % at L4, standard
loss).
"""

from __future__ import annotations

from engine.estimate import estimate
from engine.ledger.activations.stage_layers import stage_layers
from engine.ledger.row import Row
from engine.stacks.defaults import resolved
from tests.engine.ledger.test_torchtitan_profile import titan
from tests.engine.ledger.test_torchtitan_units import EMBEDDING_UNIT
from tests.trace.titan_grid import TitanCase

UNIT_FLAT = (10_485_760 + 8_388_608 + 2 * 128 + 2 * 2048 + 262_144 + 603_979_776) * 2
GRAD = 2048 * 2048 * 2
WORKING = (
    8_388_608 + 2 * 67_108_864 + 25_165_824 + 1_207_959_552 - (100_663_296 + 134_217_728 + 65_536)
)
SAVED, CKPT_INPUT = 404_021_760, 2048 * 2048 * 2


def _rows(ac: str, layers: int, loss: str = "chunked") -> dict[str, Row]:
    case = TitanCase("qwen3_moe", layers, 2048, 1, 8, ac, loss)
    return {r.id: r for r in estimate(case.plan()).heaviest.rows}


def test_a_layer_gathers_its_own_unit_at_its_pre_backward() -> None:
    rows = _rows("none", 2)
    assert UNIT_FLAT == 1_246_241_280 and WORKING == 1_140_785_152
    work = rows["hbm.activations.working.layer"]
    assert work.low == work.high == UNIT_FLAT + GRAD == 1_254_629_888
    assert "own all-gather output 1,246,241,280" in work.formula
    buf = rows["hbm.gathered.all_gather_buffer"]
    assert buf.high == UNIT_FLAT and buf.moments == frozenset()  # kept for the pool


def test_the_eager_loss_still_prefetches() -> None:
    rows = _rows("none", 2, "standard")
    work = rows["hbm.activations.working.layer"]
    assert work.high < UNIT_FLAT and "all-gather" not in work.formula
    assert "backward.layers" in rows["hbm.gathered.all_gather_buffer"].moments
    assert rows["hbm.gathered.embedding"].high == 622_329_856  # 151,936 × 2048 × 2


def test_the_embedding_counts_what_it_adds_beyond_the_first_layers_unit() -> None:
    """Qwen3-30B-A3B: its unit and all-gather output, 2 × 622,329,856, are below the
    first layer's unit and own all-gather output, 2 × 1,246,241,792: nothing added.
    Llama-3.1-8B (``test_torchtitan_units.py``, torchtitan's default chunked loss): one
    layer unit 436,224,000 B (wqkv 50,331,648 + wo 33,554,432 + w1/w2/w3 3 × 117,440,512
    + two norms 8192 each), so 2 × 1,050,673,152 − 2 × 436,224,000 = 1,228,898,304 B."""
    assert _rows("none", 2)["hbm.gathered.embedding"].high == 0
    emb = {r.id: r for r in estimate(titan()).heaviest.rows}["hbm.gathered.embedding"]
    assert emb.low == emb.high == 2 * EMBEDDING_UNIT - 2 * 436_224_000 == 1_228_898_304
    assert emb.moments == {"backward.end"}


def test_layer_sac_recomputes_only_the_checkpointed_layers() -> None:
    plan = resolved(TitanCase("qwen3_moe", 4, 2048, 1, 8, "sac_every2").plan())
    assert stage_layers(plan, 0).ends == (True, False, False)
    rows = _rows("sac_every2", 4, "standard")
    last, rest = rows["hbm.activations.working.layer"], rows["hbm.activations.working.middle_layer"]
    assert last.moments == {"backward.layers"}
    assert rest.moments == {"backward.middle", "backward.end"}
    recomputed = WORKING + SAVED - CKPT_INPUT
    assert f"= {recomputed:,} B" in last.formula and "recomputed layer" in last.formula
    assert f"= {WORKING:,} B" in rest.formula and "recomputed layer" not in rest.formula
    # the first layer keeps its whole saved set (it is not checkpointed)
    first = rows["hbm.activations.remaining.first_layer"]
    assert first.low <= SAVED <= first.high and first.low > CKPT_INPUT


def test_full_ac_still_recomputes_every_layer() -> None:
    plan = resolved(TitanCase("qwen3_moe", 4, 2048, 1, 8, "full").plan())
    assert stage_layers(plan, 0).ends == (True, True, True)
    rows = _rows("full", 4, "standard")
    assert "hbm.activations.working.middle_layer" not in rows
