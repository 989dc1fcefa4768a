"""K and V copied out to every query head by the model code (``runtime.kv_expanded``).

torchtune 0.4's ``MultiHeadAttention.forward`` (torchtune/modules/attention.py, at
1814feb: ``k.unsqueeze(2).expand(expand_shape).flatten(1, 2)``, the same for v) and
LitGPT's ``CausalSelfAttention.forward`` (litgpt/model.py: ``k.expand(...)`` then
``k.reshape(B, -1, T, head_size)``) hand the attention kernel K and V at the query heads'
count; ``flatten`` / ``reshape`` of an expanded tensor copy it, and flash keeps its
inputs for backward: the copies, not the projections' own K and V (expand and reshape
save nothing). transformers' ``sdpa_attention_forward`` passes ``enable_gqa`` instead.
"""

from __future__ import annotations

from typing import Any

from ledger_plans import SMOL, make_plan

from engine.estimate import estimate
from engine.ledger.activations.sdpa_kernel import SdpaCall, attention_key, sdpa_call
from engine.models.spec import ArchitectureSpec

SAVED = "hbm.activations.saved.layers"


def _plan(**changes: Any) -> Any:
    return make_plan(
        **{"model__architecture": SMOL, **changes},
        method__precision__policy="pure_16bit",
        parallelism__strategy="ddp",
        parallelism__dp=1,
        batch__seq_len=1024,
        batch__micro_batch=1,
        method__recompute__policy="none",
        runtime__activation_band={"low": 1.0, "high": 1.0},
    )


def test_the_kernel_sees_every_query_head_and_no_mask() -> None:
    """SmolLM's 9 query heads over 3 K/V heads (head dim 64): enable_gqa keeps 3, the
    model's copies 9; still flash (no mask, equal head counts). A padding mask adds its
    suffix after, and a non-SDPA attention takes no suffix."""
    arch = ArchitectureSpec(**SMOL)
    plain = sdpa_call(attention_key(_plan()), arch, 9, 3, 64, 64)
    copied = sdpa_call(attention_key(_plan(runtime__kv_expanded=True)), arch, 9, 3, 64, 64)
    assert plain == SdpaCall("flash", 3, False)
    assert copied == SdpaCall("flash", 9, False)
    padded = _plan(runtime__kv_expanded=True, workload__mean_sample_tokens=512)
    assert attention_key(padded) == "sdpa_flash+kv_expanded+padding_mask"
    assert sdpa_call(attention_key(padded), arch, 9, 3, 64, 64) == SdpaCall(
        "mem_efficient", 9, True
    )
    assert attention_key(_plan(runtime__kv_expanded=True, runtime__attention="eager")) == "eager"


def test_the_copies_add_the_missing_heads_k_and_v_per_layer() -> None:
    """Per token and layer flash keeps k and v at 9 heads instead of 3: 2 · (9 − 3) · 64
    · 2 B = 1,536 B more; 1,024 tokens × 30 layers → 47,185,920 B (each copy, 1,024 · 9 ·
    64 · 2 = 1,179,648 B, is a multiple of 512: no rounding)."""
    on = {r.id: r for r in estimate(_plan(runtime__kv_expanded=True)).rows}[SAVED]
    off = {r.id: r for r in estimate(_plan()).rows}[SAVED]
    assert on.high - off.high == on.low - off.low == 2 * 6 * 64 * 2 * 1024 * 30 == 47_185_920


def test_a_multi_head_model_has_nothing_to_copy() -> None:
    """Llama-2-7B-like equal head counts: expand is a no-op, nothing changes."""
    mha = {**SMOL, "kv_heads": 9}
    on = estimate(_plan(model__architecture=mha, runtime__kv_expanded=True)).heaviest.peak
    off = estimate(_plan(model__architecture=mha)).heaviest.peak
    assert on == off


def test_the_field_is_idle_outside_sdpa_and_idle_means_no_change() -> None:
    """engine/stacks/applicability.py greys runtime.kv_expanded unless the attention is an
    SDPA call: eager attention already keeps K and V repeated to every head, so turning it
    on there leaves the peak exactly as it was (SmolLM's grouped heads, s 1,024)."""
    from engine.stacks.applicability import inapplicable

    eager = _plan(runtime__attention="eager")
    assert "runtime.kv_expanded" in inapplicable(eager)
    assert "runtime.kv_expanded" not in inapplicable(_plan())
    with_copies = _plan(runtime__attention="eager", runtime__kv_expanded=True)
    assert estimate(with_copies).heaviest.peak == estimate(eager).heaviest.peak
