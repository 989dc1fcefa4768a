"""Which SDPA kernel a layer runs, and what the math kernel and ``repeat_kv`` keep
(issue 35 item 7, source review R9).

Kernel rules: torch ``aten/src/ATen/native/transformers/cuda/sdp_utils.cpp``
(``select_sdp_backend``: flash needs no mask, one head dim ≤ 256 and equal heads unless
``enable_gqa``; memory-efficient takes a mask but no grouped heads; math runs the rest).
What transformers 5.24 hands it: ``integrations/sdpa_attention.py``
(``use_gqa_in_sdpa``: ``enable_gqa`` only without a mask, else ``repeat_kv``) and
``falcon/modeling_falcon.py`` (``FalconAttention.forward``: always a mask, never
``enable_gqa``).
"""

from __future__ import annotations

from typing import Any

import pytest
import torch
import torch.nn.functional as F

from engine.ledger.activations import hf, working
from engine.ledger.activations.geometry import geometry, trainability
from engine.ledger.activations.kept import other_at
from engine.ledger.activations.sdpa_kernel import attention_key, math_backward_terms, sdpa_call
from engine.ledger.activations.stage_layers import context, stage_layers
from engine.plan import Plan, with_values
from engine.presets import plan_for_model_preset
from engine.stacks.defaults import resolved


def _plan(preset: str, **changes: Any) -> Plan:
    return resolved(with_values(plan_for_model_preset(preset), changes))


def _call(plan: Plan) -> tuple[str, int, bool]:
    g, arch = geometry(plan), plan.model.architecture
    c = sdpa_call(attention_key(plan), arch, g.heads_local, g.kv_local, g.head_dim, g.v_dim)
    return c.kernel, c.kv_heads, c.mask


def _widths(plan: Plan) -> dict[str, tuple[int, int, int]]:
    g, tr = geometry(plan), trainability(plan)
    arch = plan.model.architecture
    terms = hf.layer_terms(
        context(plan, g, tr), moe_layer=False, dense_width=hf.dense_width(arch, 1), ing=True
    )
    return {t.name: (t.width, t.bpe, t.count) for t in terms}


PADDED = {"workload.packing": "padded", "workload.mean_sample_tokens": 512}


@pytest.mark.parametrize(
    ("preset", "changes", "expected"),
    [
        # Llama-3.1-8B, 32 q over 8 kv heads, d 128: no mask → enable_gqa → flash
        ("llama-3.1-8b", {}, ("flash", 8, False)),
        # real padding (mean 512 < s 4096): a mask → repeat_kv → memory-efficient
        ("llama-3.1-8b", PADDED, ("mem_efficient", 32, True)),
        # samples filling the sequence: create_causal_mask skips the all-ones mask
        ("llama-3.1-8b", {"workload.mean_sample_tokens": 4096}, ("flash", 8, False)),
        # flash disabled, enable_gqa passed: memory-efficient refuses grouped heads → math
        ("llama-3.1-8b", {"runtime.attention": "sdpa_mem_efficient"}, ("math", 8, False)),
        # the flash-attn package unpads and groups heads itself
        ("llama-3.1-8b", {**PADDED, "runtime.attention": "flash_attn"}, ("flash", 8, False)),
        # Falcon-7B: 71 q heads over 1 kv head, always a mask, no enable_gqa → math
        ("falcon-7b", {}, ("math", 1, True)),
        # Falcon-40B: new layout broadcasts K/V to all 128 heads → memory-efficient
        ("falcon-40b", {}, ("mem_efficient", 128, True)),
        # DeepSeek-V3 MLA: q/k head dim 192, v 128 → no flash → memory-efficient
        ("deepseek-v3", {}, ("mem_efficient", 128, False)),
        ("llama-3.1-8b", {"runtime.attention": "eager"}, ("eager", 32, False)),
    ],
)
def test_kernel_per_family(preset: str, changes: dict[str, Any], expected: tuple) -> None:
    assert _call(_plan(preset, **changes)) == expected


def test_falcon_7b_math_kernel_saved_set() -> None:
    """Falcon-7B (h 4,544, 71 heads of 64, one K/V head), bf16 autocast, s 4,096, b 1.
    ``_scaled_dot_product_attention_math`` upcasts q, k, v to fp32 and its two matmuls
    keep per token: q scaled 71·64·4 = 18,176 B, k scaled and broadcast to the 71 heads
    (bmm's expanded copy) 18,176 B, v broadcast 18,176 B, the softmax 71·4,096·4 B; the
    16-bit q/k/v and the mask are kept by nobody; ``_split_heads``' two int64 index
    tensors stay; o_proj's input is the contiguous copy of the output, 4,544 · 2 B."""
    w = _widths(_plan("falcon-7b"))
    assert w["q fp32, scaled (math kernel)"] == (4_544, 4, 1)
    assert w["k fp32, scaled, per query head (math kernel)"] == (4_544, 4, 1)
    assert w["v fp32, per query head (math kernel)"] == (4_544, 4, 1)
    assert w["softmax fp32 (s×s, math kernel)"] == (71 * 4_096, 4, 1)
    assert w["k, v index tensors int64"] == (1, 8, 2)
    assert w["attn output (contiguous copy, o_proj input)"] == (4_544, 2, 1)
    for gone in ("q (roped)", "SDPA mask in the compute dtype (s×s)", "log-sum-exp fp32"):
        assert gone not in w
    # per layer: 3 × 4,096·4,544·4 + 4,096·71·4,096·4 = 223,346,688 + 4,764,729,344 B
    sl = stage_layers(_plan("falcon-7b", **{"model.architecture.layers": 2}), 0)
    core = 3 * 4_096 * 4_544 * 4 + 4_096 * 71 * 4_096 * 4
    flash_set = 4_096 * (4_544 + 64 + 64) * 2 + 4_096 * 4_096 * 2 + 4_096 * 4_544 * 2
    assert sl.kinds[0].bytes - core > 0
    assert core - flash_set > 4.5 * 2**30  # the fp32 scores: why Falcon plans ran 27–52 % low


def test_math_kernel_matches_torch_saved_tensors() -> None:
    """The same function runs on CPU: a bf16 SDPA over 8 q heads and 1 K/V head with a
    bool mask (no ``enable_gqa``) takes the math path; autograd keeps exactly four fp32
    tensors — q, k and v at 8 heads and the (b, h, s, s) softmax — as ``math_terms``
    counts (b 2, s 64, d 32: 3 × 2·8·64·32·4 + 2·8·64·64·4 bytes)."""
    b, h, s, d = 2, 8, 64, 32
    q = torch.randn(b, h, s, d, dtype=torch.bfloat16, requires_grad=True)
    k = torch.randn(b, 1, s, d, dtype=torch.bfloat16, requires_grad=True)
    v = torch.randn(b, 1, s, d, dtype=torch.bfloat16, requires_grad=True)
    mask = torch.ones(b, 1, s, s, dtype=torch.bool).tril()
    saved: dict[int, tuple[torch.dtype, int]] = {}

    def pack(t: torch.Tensor) -> torch.Tensor:
        st = t.untyped_storage()
        saved[st.data_ptr()] = (t.dtype, st.nbytes())
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    assert sorted(saved.values(), key=lambda x: x[1]) == [
        (torch.float32, b * h * s * d * 4),
        (torch.float32, b * h * s * d * 4),
        (torch.float32, b * h * s * d * 4),
        (torch.float32, b * h * s * s * 4),
    ]


def test_padding_mask_repeats_kv_and_keeps_the_mask() -> None:
    """R9, Llama-3.1-8B s 4,096 b 1, samples of 512 tokens padded: ``repeat_kv`` copies
    K and V to 32 heads (4,096 wide each instead of 1,024) and the memory-efficient
    kernel keeps the compute-dtype mask (4,096 · 2 B per token). Per layer
    4,096 · (2 · 3,072 · 2 + 4,096 · 2) = 83,886,080 B, × 32 layers = 2,684,354,560 B
    (the review's ≈ +2.7 GB)."""
    plain, padded = _plan("llama-3.1-8b"), _plan("llama-3.1-8b", **PADDED)
    w = _widths(padded)
    assert w["k repeated to all heads (repeat_kv)"] == (4_096, 2, 1)
    assert w["v repeated to all heads (repeat_kv)"] == (4_096, 2, 1)
    assert w["SDPA mask in the compute dtype (s×s)"] == (4_096, 2, 1)
    grow = stage_layers(padded, 0).plain_bytes - stage_layers(plain, 0).plain_bytes
    assert grow == 32 * 4_096 * (2 * 3_072 * 2 + 4_096 * 2) == 2_684_354_560


def test_padding_mask_kept_by_checkpoint() -> None:
    """Under full recompute each checkpointed layer keeps ``create_causal_mask``'s one
    shared (b, 1, s, s) bool mask as an input: 4,096² B once, beside the rotary tables."""
    plan = _plan("llama-3.1-8b", **PADDED, **{"method.recompute.policy": "full"})
    parts = other_at(plan, True)
    assert callable(parts)
    named = dict((str(k), v) for k, v in parts(geometry(plan)))
    assert named["bool mask kept by checkpoint 1·1·4096·4096"] == 4_096 * 4_096
    unpadded = other_at(_plan("llama-3.1-8b", **{"method.recompute.policy": "full"}), True)
    assert not callable(unpadded)


def test_math_kernel_backward_is_the_working_set() -> None:
    """Falcon-7B s 4,096: the math kernel's backward holds two fp32 (s × s) gradients per
    head (of the probabilities, of the scores: 2 · 71 · 4,096 · 4 = 2,326,528 B a token)
    and v's fp32 gradient per head (4,544 · 4), far above the MLP's three 18,176-wide
    16-bit gradients (109,056 B a token): that is the layer's working set. Llama (flash)
    has none."""
    plan = _plan("falcon-7b")
    g = geometry(plan)
    terms = {t.name: (t.width, t.bpe, t.count) for t in working._dense_terms(plan, g)}
    assert terms["grads of the probabilities and scores fp32 (s×s, math kernel)"] == (
        71 * 4_096,
        4,
        2,
    )
    assert terms["grad of v fp32 per query head (math kernel)"] == (4_544, 4, 1)
    llama = _plan("llama-3.1-8b")
    assert math_backward_terms(attention_key(llama), llama.model.architecture, g) == []
