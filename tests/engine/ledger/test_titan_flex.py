"""Flex attention's fp32 row max under the torchtitan profile, hand-derived.

torch 2.13 ``torch/_higher_order_ops/flex_attention.py``
``FlexAttentionAutogradOp.forward`` saves ``query, key, value, out, logsumexp,
max_scores`` — ``max_scores`` a (B, H, L) fp32 tensor like the log-sum-exp — and
torchtitan 0.3.0's per-op SAC (``distributed/activation_checkpoint.py``) caches every
output of the ``flex_attention`` op on its save list. torchtitan 0.3.0's Llama 3 runs
flex by default (``models/llama3/__init__.py`` ``model_registry(attn_backend="flex")``).
Llama-3.1-8B: 32 heads × 4 B = 128 B a token a layer more, with no AC and under per-op
SAC; full AC keeps only the block input, so nothing more. The traced grid
(``docs/fidelity-grid.md``) measures 168,072 + 130 and 65,664 + 130 B a token a layer
for none and per-op SAC, 130 = these 128 + the block mask's share.
"""

from __future__ import annotations

from engine.ledger.activations import torchtitan as tt
from engine.ledger.activations.geometry import geometry, terms_bytes
from engine.ledger.activations.stage_layers import stage_layers
from engine.stacks.defaults import resolved
from tests.engine.ledger.test_torchtitan_profile import (
    FULL_PER_TOKEN,
    NONE_PER_TOKEN,
    SAC_PER_TOKEN,
    rows_of,
    titan,
)

S = 512
"""One sequence of 512 tokens: every term's bytes a multiple of the 512-B granularity,
so bytes ÷ 512 is bytes a token."""


def _per_token(**changes: object) -> tuple[int, int]:
    """(one plain layer's saved bytes a token, a checkpointed layer's)."""
    plan = resolved(titan(batch__micro_batch=1, batch__seq_len=S, **changes))
    sl = stage_layers(plan, 0)
    g = geometry(plan)
    plain = terms_bytes(sl.kinds[0].terms, g) // S if sl.n_plain else 0
    return plain, terms_bytes(sl.ckpt, g) // S


def test_flex_adds_the_fp32_row_max_to_the_saved_set() -> None:
    g = geometry(resolved(titan(batch__micro_batch=1, batch__seq_len=S)))
    assert terms_bytes(tt.layer_terms(g), g) // S == NONE_PER_TOKEN
    assert terms_bytes(tt.layer_terms(g, flex=True), g) // S == NONE_PER_TOKEN + 32 * 4
    sac = terms_bytes(tt.op_sac_terms(g, fused_qkv=False, flex=True), g) // S
    assert sac == SAC_PER_TOKEN + 128  # SAC_PER_TOKEN counts the block input


def test_the_plan_kernel_decides() -> None:
    """runtime.attention = flex: +128 B a token under per-op SAC (the default) and with
    no AC; full AC unchanged."""
    _, sac = _per_token(runtime__attention="flex")
    _, sac_sdpa = _per_token()
    assert sac - sac_sdpa == 128
    none, _ = _per_token(runtime__attention="flex", method__recompute__policy="none")
    none_sdpa, _ = _per_token(method__recompute__policy="none")
    assert none - none_sdpa == 128
    _, full = _per_token(runtime__attention="flex", method__recompute__policy="full")
    assert full == FULL_PER_TOKEN


def test_torchtitan_fuses_qkv_by_default() -> None:
    """``runtime.qkv_fusion`` auto → fused under torchtitan (0.3.0
    ``_build_llama3_layers(fuse_qkv=True)``): the Llama preset's separate q / k / v
    become one ``wqkv`` — one fused-AdamW step counter a layer instead of three (2 × 512 B
    less a layer, 32 layers: 32,768 B) and per-op SAC caches wqkv's q + 2·kv = 6,144
    elements a token (mm 1) where separate projections cache wq's 4,096 and wv's 1,024;
    the other stacks keep the model's own layout; a plan that says ``as_model`` keeps it."""
    plan = resolved(titan(runtime__qkv_fusion="auto"))
    assert plan.runtime.qkv_fusion == "fused" and plan.model.architecture.fused_qkv
    kept = resolved(titan())  # the shared case pins as_model (the Dec-2024 code)
    assert not kept.model.architecture.fused_qkv
    other = resolved(titan(stack__name="pytorch", runtime__qkv_fusion="auto"))
    assert other.runtime.qkv_fusion == "as_model" and not other.model.architecture.fused_qkv
    steps = rows_of(titan(runtime__qkv_fusion="auto"))["hbm.optimizer.step"].low
    assert rows_of(titan())["hbm.optimizer.step"].low - steps == 32 * 2 * 512
    _, sac = _per_token(runtime__qkv_fusion="auto")
    _, sac_separate = _per_token()
    assert sac - sac_separate == (4096 + 2 * 1024 - 4096 - 1024) * 2
