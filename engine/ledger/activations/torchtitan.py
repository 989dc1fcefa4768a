"""The ``torchtitan`` profile: what one torchtitan decoder block keeps for backward.

torchtitan runs its own model code (``torchtitan/models/llama3/model.py``), not
transformers', and its own activation checkpointing
(``torchtitan/distributed/activation_checkpoint.py``; ``parallelisms/
parallelize_llama.py`` at 9dec370, the Dec-2024 benchmark commit). Per token, with h the
hidden width, q = H·d the query width and kv = K·d the key / value width on this rank,
I the MLP width, c the compute dtype's bytes and r the residual stream's:

- **none** (no AC), autograd's saved set of ``TransformerBlock.forward``:
  ``attention_norm`` (``nn.RMSNorm`` → ``_fused_rms_norm``: its input, r·h, and the fp32
  rstd, 4), its output kept once by wq / wk / wv (c·h), the complex fp32 rotary against
  the ``freqs_cis`` buffer (keeps only the buffer: nothing per layer), attention (q, k,
  v, output: c·(2q + 2kv); fp32 logsumexp 4·H; wo keeps the output itself), the
  ``ffn_norm`` (r·h + 4) and its output (c·h), and the SwiGLU MLP
  ``w2(silu(w1(x)) * w3(x))``: w1's output (silu's input), silu's output, w3's output
  and the product (w2's input), 4·c·I;
- **selective** (``SelectiveAC``, per-op): the block runs under
  ``create_selective_checkpoint_contexts``; an op on the save list (mm, the SDPA /
  flash / flex kernels, reduce_scatter_tensor, max) has its outputs cached, except every
  second mm (``forward_mm_count`` even), and the rest is recomputed in backward. A
  block's mms run in the order wq, wk, wv, wo, w1, w3, w2 (``FeedForward.forward``
  evaluates ``w1(x)`` before ``w3(x)``), so wq, wv, w1 and w2 (counts 1, 3, 5, 7) are
  cached and wk, wo, w3 recomputed. Kept: the block input (the checkpoint's argument,
  r·h), wq's output c·q, wv's c·kv, the attention output c·q and fp32 logsumexp 4·H,
  w1's c·I and w2's c·h (full tokens: under TP it is the partial sum before the
  reduction); under sequence parallelism the two reduce-scatters' outputs too (2·c·h
  over the sequence shard). The block's own autograd saved set is recomputed in its
  backward (the working set's recomputed layer);
- **every_k** (layer SAC, ``selective_ac_option = k``): a counter starting at 1 wraps
  block i in a full checkpoint when it reaches a multiple of k, so blocks with
  (i + 1) % k == 0 keep their input and the others their whole saved set;
- **full** (``FullAC``): each block keeps its input.

Llama-style dense blocks (torchtitan's llama3 and qwen3, with its q / k norms;
deepseek_v3's MLA latents are not counted yet). A torchtitan MoE block's terms are
:mod:`~engine.ledger.activations.titan_moe`'s (attention half from here). torchtitan
trains every weight, so the terms read no trainability, and its attention is always a
fused kernel (SDPA at 9dec370; flex in 0.3, ``models/llama3/__init__.py``
``model_registry(attn_backend="flex")``). Flex (``runtime.attention = flex``) keeps a
second fp32 per-head row next to the log-sum-exp, the row max: torch's
``FlexAttentionAutogradOp.forward`` (``torch/_higher_order_ops/flex_attention.py``)
saves ``query, key, value, out, logsumexp, max_scores`` (each (B, H, L), fp32), and
per-op SAC caches all of the ``flex_attention`` op's outputs, so 4·H more per token with
no AC and under per-op SAC. Under context parallelism the ring attention calls the
kernel once per K/V chunk, and per-op SAC caches each call's output: not counted either.
"""

from __future__ import annotations

from engine.ledger.activations.geometry import FP32, Geometry, Term
from engine.ledger.activations.library_versions import version_tuple

SAVED_MMS = ("wq", "wv", "w1", "w2")
"""The block's matmuls whose outputs per-op SAC caches (odd ``forward_mm_count``)."""
RECOMPUTED_MMS = ("wk", "wo", "w3")
"""The block's matmuls per-op SAC recomputes (even ``forward_mm_count``)."""


def norm_terms(g: Geometry, label: str) -> list[Term]:
    """``nn.RMSNorm`` as torch's fused kernel runs it: its input and the fp32 rstd."""
    return [
        Term(f"{label} input", g.hidden, g.residual_bytes, "seq"),
        Term(f"{label} rstd fp32", 1, FP32, "seq"),
    ]


def _flex_terms(g: Geometry, flex: bool, note: str = "") -> list[Term]:
    """Flex attention's fp32 row max, saved beside the log-sum-exp (module docstring)."""
    return [Term(f"flex attention max scores fp32{note}", g.heads_local, FP32)] if flex else []


def layer_terms(g: Geometry, qk_norm: bool = False, flex: bool = False) -> list[Term]:
    """A dense block's autograd saved set with no recompute (module docstring, none)."""
    c = g.compute_bytes
    return [
        *attention_terms(g, qk_norm, flex),
        *norm_terms(g, "ffn_norm"),
        Term("ffn_norm output (w1, w3 input)", g.hidden, c),
        Term("w1 out, silu out, w3 out, product (w2 input)", g.inter_local, c, count=4),
    ]


def attention_terms(g: Geometry, qk_norm: bool = False, flex: bool = False) -> list[Term]:
    """The attention half of a block's saved set (the MoE block shares it).

    ``qk_norm`` (torchtitan's qwen3 ``Attention``: ``q_norm`` / ``k_norm``, ``RMSNorm``
    over each head's ``head_dim``, before the rotary): each fused norm keeps its input,
    the projected q (H·d·c) and k (K·d·c), and an fp32 rstd per head (H·4, K·4); the
    rotary against the cos / sin buffers keeps only the buffers."""
    c = g.compute_bytes
    q, kv = g.heads_local * g.head_dim, g.kv_local * g.head_dim
    norms = (
        [
            Term("q_norm input (wq output)", q, c),
            Term("q_norm rstd fp32", g.heads_local, FP32),
            Term("k_norm input (wk output)", kv, c),
            Term("k_norm rstd fp32", g.kv_local, FP32),
        ]
        if qk_norm
        else []
    )
    return [
        *norms,
        *norm_terms(g, "attention_norm"),
        Term("attention_norm output (wq, wk, wv input)", g.hidden, c),
        Term("attention q (after rotary)", q, c),
        Term("attention k (after rotary), v", kv, c, count=2),
        Term("attention output (wo input)", g.heads_local * g.v_dim, c),
        Term("attention logsumexp fp32", g.heads_local, FP32),
        *_flex_terms(g, flex),
    ]


def checkpoint_input_terms(g: Geometry) -> list[Term]:
    """A fully checkpointed block (FullAC, or layer SAC's k-th): its input."""
    return [Term("block input (checkpoint)", g.hidden, g.residual_bytes, "seq")]


def op_sac_terms(g: Geometry, fused_qkv: bool = False, flex: bool = False) -> list[Term]:
    """What per-op SAC keeps of a dense block (module docstring, selective)."""
    c = g.compute_bytes
    terms = [
        *attention_op_sac_terms(g, fused_qkv, flex),
        Term("w1 output (mm 5, cached)", g.inter_local, c),
        Term("w2 output (mm 7, cached)", g.hidden, c),
    ]
    if g.sp:
        terms.append(Term("wo, w2 reduce-scatter outputs (cached)", g.hidden, c, "seq", count=2))
    return terms


def attention_op_sac_terms(g: Geometry, fused_qkv: bool, flex: bool) -> list[Term]:
    """What per-op SAC keeps of a block's input and attention half (the MoE block too).

    ``fused_qkv`` (0.3's ``wqkv``, ``Attention.forward`` one ``self.wqkv(x)`` mm): the
    mms run wqkv, wo, w1, w3, w2 (counts 1–5), so wqkv's whole output, q + 2·kv, is
    cached and wo and w3 recomputed; w1 and w2 are cached either way."""
    c = g.compute_bytes
    q, kv = g.heads_local * g.head_dim, g.kv_local * g.head_dim
    qkv = (
        [Term("wqkv output (mm 1, cached)", q + 2 * kv, c)]
        if fused_qkv
        else [Term("wq output (mm 1, cached)", q, c), Term("wv output (mm 3, cached)", kv, c)]
    )
    return [
        *checkpoint_input_terms(g),
        *qkv,
        Term("attention output (cached)", g.heads_local * g.v_dim, c),
        Term("attention logsumexp fp32 (cached)", g.heads_local, FP32),
        *_flex_terms(g, flex, " (cached)"),
    ]


NN_RMSNORM_SINCE = (0, 1, 0)
"""The first torchtitan release on ``nn.RMSNorm`` (#985, 3b39d7a, 2025-03-19, removed
``torchtitan/models/norms.py``'s own ``RMSNorm``; ``assets/version.txt`` still said 0.0.2
until 0.1.0, so a 0.0.2 plan is read as the 2024 code the published runs used)."""


def composite_final_norm(version: str) -> bool:
    """Whether this torchtitan's final norm is its own eager composite ``RMSNorm``."""
    return version_tuple(version) < NN_RMSNORM_SINCE


def final_norm_terms(g: Geometry, composite: bool = False) -> list[Term]:
    """The final ``norm`` and the output projection's input (last stage).

    ``composite``: torchtitan before 0.1.0 (9dec370 ``torchtitan/models/norms.py``
    ``RMSNorm.forward``: ``self._norm(x.float()).type_as(x) * self.weight``, with
    ``_norm(x) = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)``). The final
    norm sits outside the compiled blocks, so autograd keeps what each op saves: the
    fp32 upcast (``pow`` and the ``x * rsqrt`` product keep it), the rsqrt, and the
    16-bit ``type_as`` output (the ``* self.weight`` product keeps it) — 4·h + 4 + c·h
    a token where ``nn.RMSNorm``'s fused kernel keeps its 16-bit input and the rstd."""
    c = g.compute_bytes
    head = Term("final norm output (output input)", g.hidden, c)
    if not composite:
        return [*norm_terms(g, "final norm"), head]
    return [
        Term(
            "final norm fp32 input (x.float(), kept by pow and the rsqrt product)",
            g.hidden,
            FP32,
            "seq",
        ),
        Term("final norm rsqrt fp32", 1, FP32, "seq"),
        Term("final norm type_as output (kept by * weight)", g.hidden, c, "seq"),
        head,
    ]
