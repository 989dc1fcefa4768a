"""What a transformers 5.24 attention block saves for backward, per family.

Rotary embedding multiplies by cos / sin, which need no gradient, so only the shared
cos / sin are kept — not q, k or rotate_half(q). SDPA (flash / memory-efficient kernels)
keeps q, k, v, its output and an fp32 log-sum-exp per head and token; GQA runs without
repeating K/V (``enable_gqa``). Per family:

- a fused qkv projection (Phi-3, GPT-NeoX, GPT-2) hands SDPA views of its one output,
  so that whole output is kept; Falcon's new layout copies K and V out to every head
  (``FalconAttention._split_heads``), and Falcon always passes a (b, 1, s, s) mask, which
  SDPA converts to the compute dtype per call and the memory-efficient kernel keeps;
- the kernel torch runs (:mod:`~engine.ledger.activations.sdpa_kernel`): a mask rules out
  flash, grouped K/V without ``enable_gqa`` the memory-efficient kernel too; the math
  kernel keeps fp32 q, k, v per query head and the fp32 (s × s) softmax (Falcon-7B);
  with a padding mask ``repeat_kv``'s copies are kept (R9);
- the kernel's output takes q's memory layout, and a q built by ``torch.cat`` (partial
  rotary; MLA's q_nope + q_rot) is (b, h, s, d)-contiguous, so o_proj's
  ``transpose(1, 2).reshape(b, s, -1)`` copies it;
- q/k norms (Qwen3, Gemma-3, OLMo-2, Cohere, StableLM, Llama-4) run on the projections'
  outputs, with their family's norm kind;
- eager attention keeps the repeated K/V, the fp32 softmax and its 16-bit copy
  (s × s), and Gemma-2's tanh of the soft-capped scores;
- MLA (DeepSeek) keeps its latents' norms and the up-projections' inputs; v is a view
  of ``kv_b_proj``'s output (k_nope and v per head).
"""

from __future__ import annotations

from engine.ledger.activations.geometry import FP32, INT64, Term
from engine.ledger.activations.hf_layer import HfLayer, attention_roles, needs_grad
from engine.ledger.activations.hf_norms import (
    NormSite,
    adapter_terms,
    consumer_terms,
    input_kept,
    l2_norm_saved,
    norm_saved,
)
from engine.ledger.activations.sdpa_kernel import SdpaCall, sdpa_call
from engine.models.spec import ArchitectureSpec


def falcon_new_layout(a: ArchitectureSpec) -> bool:
    """Falcon's new decoder architecture (grouped kv heads or two parallel norms)."""
    return a.residual == "parallel_two_norms" or a.kv_heads not in (1, a.heads)


def qk_norm_terms(c: HfLayer) -> list[Term]:
    """The q and k norms, on the projections' outputs (before rotary; Llama-4's after)."""
    if not c.arch.qk_norm:
        return []
    g, t = c.g, c.t
    terms: list[Term] = []
    for name, heads in (("q_norm", g.heads_local), ("k_norm", g.kv_local)):
        width = heads * g.head_dim
        site = NormSite(
            name,
            t.qk_norm,
            width,
            g.compute_bytes,
            groups=1 if t.qk_scope == "whole" else heads,
            axis="full",
            separate_groups=c.arch.family == "stablelm",
            weight_width=width if c.arch.family == "cohere" else 0,
        )
        if t.qk_scope == "l2":
            terms += l2_norm_saved(site)
        else:
            terms += norm_saved(g, c.tr, site, c.param_fp32)
    return terms


def qkv_terms(c: HfLayer) -> list[Term]:
    """What SDPA receives as q, k, v, as the family builds them."""
    g, a, cb = c.g, c.arch, c.g.compute_bytes
    q, kv, v = g.heads_local * g.head_dim, g.kv_local * g.head_dim, g.kv_local * g.v_dim
    fused_width = q + 2 * kv
    if g.mla is not None:
        return [
            Term("q (cat of q_nope, roped q_rot)", q, cb),
            Term("k (k_nope and the shared roped k_rot, copied per head)", kv, cb),
            Term("v: a view of kv_b_proj's output", g.heads_local * g.mla.kv_b_width, cb),
        ]
    if a.family == "falcon":
        if falcon_new_layout(a):
            return [
                Term("q (roped)", q, cb),
                Term("k (roped), v copied to every head", q, cb, count=2),
                Term("k, v index tensors int64", 1, INT64, "const", count=2),
            ]
        if a.kv_heads == 1:
            return [
                Term("q (roped)", q, cb),
                Term("k (roped)", kv, cb),
                Term("v (indexed copy)", v, cb),
                Term("k, v index tensors int64", 1, INT64, "const", count=2),
            ]
    if a.fused_qkv and not c.rotary:
        return [Term("q, k, v: views of the fused qkv output", fused_width, cb)]
    if a.fused_qkv:
        return [
            Term("q (roped)", q, cb),
            Term("k (roped)", kv, cb),
            Term("v: a view of the fused qkv output", fused_width, cb),
        ]
    return [Term("q (roped)", q, cb), Term("k (roped)", kv, cb), Term("v", v, cb)]


def out_copied(c: HfLayer, kernel: str = "flash") -> bool:
    """Whether o_proj's input is a copy of the kernel's output (q built by a cat:
    partial rotary — Phi-3 always concatenates —, MLA). Only flash's output takes q's
    layout: the memory-efficient kernel allocates its output (b, s, h, d)
    (``_efficient_attention_forward``), so ``transpose(1, 2).reshape`` is a view."""
    if kernel != "flash":
        return False
    partial = c.rotary and (c.t.rotary_fraction < 1 or c.arch.family == "phi3")
    return c.g.mla is not None or partial


def call_of(c: HfLayer) -> SdpaCall:
    """The layer's :class:`~engine.ledger.activations.sdpa_kernel.SdpaCall`."""
    g = c.g
    return sdpa_call(c.attention, c.arch, g.heads_local, g.kv_local, g.head_dim, g.v_dim)


def repeated_terms(c: HfLayer) -> list[Term]:
    """q, k, v when ``repeat_kv`` copied K and V to every query head (a mask, or a head
    dim over 256, rules out ``enable_gqa``): the copies are what the kernel keeps; the
    projections' own K and V are kept by nobody (expand / reshape save nothing)."""
    g, cb = c.g, c.g.compute_bytes
    q = g.heads_local * g.head_dim
    return [
        Term("q (roped)", q, cb),
        Term("k repeated to all heads (repeat_kv)", q, cb),
        Term("v repeated to all heads (repeat_kv)", g.heads_local * g.v_dim, cb),
    ]


def math_terms(c: HfLayer) -> list[Term]:
    """The math kernel (torch ``_scaled_dot_product_attention_math``): 16-bit q, k, v
    are upcast to fp32 (``allowFP16BF16ReductionMathSDP`` is off by default), q and k
    scaled, and the two ``matmul``s keep fp32 q, k and v broadcast to every query head
    (bmm copies of a 1-head K/V) and the fp32 softmax (b, h, s, s); the mask is added
    in place and kept by nobody, the 16-bit inputs neither (``to`` saves nothing).
    Falcon's ``_split_heads`` index tensors stay (the index ops keep them)."""
    g = c.g
    q = g.heads_local * g.head_dim
    terms = [
        Term("q fp32, scaled (math kernel)", q, FP32),
        Term("k fp32, scaled, per query head (math kernel)", q, FP32),
        Term("v fp32, per query head (math kernel)", g.heads_local * g.v_dim, FP32),
        Term("softmax fp32 (s×s, math kernel)", g.heads_local * g.seq, FP32),
    ]
    if c.arch.family == "falcon" and not falcon_new_layout(c.arch):
        terms.append(Term("k, v index tensors int64", 1, INT64, "const", count=2))
    return terms


def attention_terms(c: HfLayer, in_grad: bool = True) -> list[Term]:
    """q/k norms, the attention core and o_proj's input (adapters), for an input that
    needs a gradient or not (``in_grad``)."""
    g, tr, t, cb = c.g, c.tr, c.t, c.g.compute_bytes
    q = g.heads_local * g.head_dim
    out = g.heads_local * g.v_dim
    o_kept = input_kept(g, tr, ("o",), cb)
    core = needs_grad(tr, in_grad, attention_roles(c))
    terms: list[Term] = []
    if g.mla is not None:
        terms += mla_latent_terms(c, in_grad)
    if not core:  # nothing before o_proj needs a gradient
        if o_kept:
            terms.append(Term("attn output (o_proj input)", out, cb))
    elif c.attention == "eager":
        terms += qk_norm_terms(c)
        terms += [Term("q (roped)", q, cb), Term("k, v repeated to all heads", q, cb, count=2)]
        if not c.selective:
            s = g.heads_local * g.seq
            if t.attn_softcap:
                terms.append(Term("tanh of the soft-capped scores (s×s)", s, cb))
            terms.append(Term("softmax fp32 (s×s)", s, FP32))
            if cb != FP32:  # .to(query.dtype) copies only when it casts
                terms.append(Term("softmax 16-bit copy (s×s)", s, cb))
        if o_kept:
            terms.append(Term("attn output (contiguous copy, o_proj input)", out, cb))
    elif (call := call_of(c)).kernel == "math":
        terms += qk_norm_terms(c)
        terms += math_terms(c)
        if o_kept:
            terms.append(Term("attn output (contiguous copy, o_proj input)", out, cb))
    else:
        terms += qk_norm_terms(c)
        repeated = call.kv_heads != g.kv_local and c.arch.family != "falcon"
        terms += repeated_terms(c) if repeated else qkv_terms(c)
        if call.mask:
            terms.append(Term("SDPA mask in the compute dtype (s×s)", g.seq, cb))
        terms += [Term("attn output", out, cb), Term("log-sum-exp fp32", g.heads_local, FP32)]
        if out_copied(c, call.kernel) and o_kept:
            terms.append(Term("attn output copy (o_proj input)", out, cb))
    terms += adapter_terms(g, tr, "attn output", [("o", out)], cb)
    return terms


def mla_latent_terms(c: HfLayer, in_grad: bool) -> list[Term]:
    """MLA's low-rank latents (``DeepseekV3Attention.forward``): each latent's RMSNorm
    (q_a_layernorm, kv_a_layernorm) and its output kept by the up-projection."""
    g, tr = c.g, c.tr
    assert g.mla is not None
    terms: list[Term] = []
    latents = (
        ("q latent", g.mla.q_rank, "q_a", "q_b"),
        ("kv latent", g.mla.kv_rank, "kv_a", "kv_b"),
    )
    for name, width, down, up in latents:
        if width:
            ing = needs_grad(tr, in_grad, (down,))
            site = NormSite(f"{name} norm", "rms", width, g.compute_bytes, ing, axis="full")
            terms += norm_saved(g, tr, site, c.param_fp32)
            terms += consumer_terms(g, tr, name, width, (up,))
    return terms
