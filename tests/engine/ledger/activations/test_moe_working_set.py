"""The MoE layer's backward working set (``engine/ledger/activations/working.py``), on
the grid's tiny models (``tests/trace/grid.py``: T = 256 tokens, h = 256, 8 experts of
I = 128, top-2, bf16, FSDP2 over 8 ranks, full recompute)."""

from __future__ import annotations

from engine.estimate import estimate
from engine.ledger.row import Row
from tests.trace.grid import Case


def _rows(family: str, strategy: str = "fsdp8") -> dict[str, Row]:
    plan = Case(family, {"strategy": strategy, "recompute": "full"}).plan()
    return {r.id: r for r in estimate(plan).rows}


def test_mixtral_combine_backward() -> None:
    """transformers 5.24 ``grouped_mm_experts_forward`` ends with
    ``weighted_out = proj_out * sample_weights_g`` (fp32: Mixtral's routing weights are
    the fp32 softmax), ``weighted_out[inv_perm]``, ``.view(T, k, h).sum(1)``, ``.to(bf16)``.
    Its backward, the layer's first, holds: the layer output's grad 256·256·2 = 131,072,
    the ``.to`` upcast 256·256·4 = 262,144, the contiguous expanded grad 512·256·4 =
    524,288 and index's zeros + ``index_put`` 2 × 524,288: 1,966,080 B; + the recomputed
    layer 2,526,720 − its checkpointed input 131,072 = 4,361,728 B."""
    row = _rows("mixtral")["hbm.activations.working.layer"]
    assert "= 1,966,080 + recomputed layer 2,526,720" in row.formula
    assert "= 4,361,728 B" in row.formula
    assert row.source == "hf-transformers-moe-combine"


def test_granitemoe_after_experts_moment() -> None:
    """Granite-MoE's routing weights are bf16 (no upcast: the combine holds 131,072 +
    3 × 512·256·2 = 917,504), so the later moment is larger: the post-attention RMSNorm's
    backward (2 residual grads 262,144 + 4 fp32 256·256·4 = 1,048,576) while FSDP2 holds
    the layer's unsharded expert grads 8 × 3·128·256·2 = 1,572,864 and the router's
    8·256·2 = 4,096 (``FSDPParamGroup.post_backward`` runs after the whole layer):
    2,887,680 B; + recomputed 2,516,480 − the MoE block's saved set already freed
    1,068,544 (router 4,096 + 2,048, dispatch 3 × 4,096 + 512, gathered 262,144, gate_up
    262,144, act 131,072, product 131,072, weights 1,024, outputs 262,144) − 131,072
    = 4,204,544 B."""
    row = _rows("granitemoe")["hbm.activations.working.layer"]
    assert "= 2,887,680 + recomputed layer 2,516,480" in row.formula
    assert "freed 1,068,544" in row.formula
    assert "= 4,204,544 B" in row.formula


def test_expert_grads_only_under_fsdp2() -> None:
    """Without FSDP2 the experts' gradients are the persistent gradient rows: the
    after-experts moment holds only the norm's backward, and the combine wins."""
    row = _rows("granitemoe", "plain")["hbm.activations.working.layer"]
    assert "unsharded" not in row.formula


def test_deepseek_first_layer_is_dense() -> None:
    """DeepSeek-V2's layer 0 is dense (``first_k_dense_replace``): the first layer's
    backward (``backward.end``) uses the dense layer's saved set 2,859,008 B and the
    dense working set (3 × 256·512·2 + 2 × 256·256·2 = 1,048,576), not the MoE layer's;
    the last layer's backward prefetches layer 0's (dense, smaller) unit."""
    rows = _rows("deepseek_v2")
    first = rows["hbm.activations.working.first_layer"]
    assert first.moments == frozenset({"backward.end"})
    assert "= 1,048,576 + recomputed layer 2,859,008" in first.formula
    assert "backward.end" not in rows["hbm.activations.working.layer"].moments
    last_buf = rows["hbm.gathered.all_gather_buffer.last_layer"]
    assert last_buf.moments == frozenset({"backward.layers"})
    assert last_buf.low < rows["hbm.gathered.all_gather_buffer"].low


def test_uniform_stage_keeps_one_row() -> None:
    """Every layer of Mixtral is MoE: one working row for every in-layer moment, one
    all-gather buffer row."""
    rows = _rows("mixtral")
    assert "hbm.activations.working.first_layer" not in rows
    assert "hbm.gathered.all_gather_buffer.last_layer" not in rows
