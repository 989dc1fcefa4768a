"""Which attention kernel an hf-transformers layer's SDPA call really runs.

What the attention core keeps for backward depends on the kernel torch picks, and torch
picks it from what the modeling code hands it (torch ``aten/src/ATen/native/transformers/
cuda/sdp_utils.cpp``, ``select_sdp_backend``: flash, then memory-efficient, then math):

- **flash** needs no ``attn_mask``, head dims ≤ 256 and equal for q, k and v, and equal
  head counts unless ``enable_gqa`` (``check_batch_size_and_num_heads_dense<true>``);
- **memory-efficient** accepts a mask and a v head dim of its own, but no grouped heads
  (``check_batch_size_and_num_heads_dense<false>``: ``enable_gqa`` cannot help it);
- **math** runs everything else.

What the modeling code hands it (transformers 5.24):

- the shared ``integrations/sdpa_attention.py`` ``sdpa_attention_forward`` passes
  ``enable_gqa`` only when ``use_gqa_in_sdpa`` holds — no mask and a head dim ≤ 256 —,
  else ``repeat_kv`` copies K and V out to every query head; it passes a mask only when
  the batch has real padding (``create_causal_mask`` skips an all-ones mask for SDPA),
  i.e. ``workload.packing = padded`` with samples shorter than the sequence (R9);
- Falcon (``falcon/modeling_falcon.py``, ``FalconAttention.forward``) calls
  ``scaled_dot_product_attention`` itself, always with a mask (``allow_is_causal_skip=
  False``) and never with ``enable_gqa``: its multi-query layout (Falcon-7B: 71 query
  heads over one K/V head) therefore runs the math kernel; its new layout broadcasts K
  and V to every head first, so the memory-efficient one runs.

Other model code copies K and V out to every query head itself before the call
(``runtime.kv_expanded``): torchtune 0.4's ``MultiHeadAttention.forward``
(torchtune/modules/attention.py: ``k.unsqueeze(2).expand(...).flatten(1, 2)``, a copy)
and LitGPT's ``CausalSelfAttention.forward`` (``k.expand(...)`` then ``reshape``, a
copy); the kernel then sees equal head counts, no mask, and keeps the copies — what
``repeat_kv`` leaves, without its mask.

``runtime.attention = sdpa_mem_efficient`` (flash disabled, e.g. a GPU without it) takes
the same rules without flash; ``flash_attn`` (the flash-attn package) unpads a padded
batch and handles grouped heads itself, so it keeps flash's set; ``eager`` is eager.

The kernel is carried to the cached per-layer term builders inside the attention string
(:func:`attention_key`), so plans that differ in nothing the kernel reads share them.
"""

from __future__ import annotations

from typing import Literal, NamedTuple

from engine.ledger.activations.geometry import Geometry, Term
from engine.models.spec import ArchitectureSpec
from engine.plan import Plan

Kernel = Literal["flash", "mem_efficient", "math", "eager"]

PADDING_MASK = "+padding_mask"
"""Suffix of :func:`attention_key` when the batch carries a real padding mask (last)."""
KV_EXPANDED = "+kv_expanded"
"""Suffix of :func:`attention_key` when the model code copies K/V to every query head."""

FLASH_MAX_HEAD_DIM = 256
"""Flash's (and ``use_gqa_in_sdpa``'s) largest head dim."""


class SdpaCall(NamedTuple):
    """What one layer's attention call runs: the kernel, the K/V heads it receives (the
    query heads when K/V were repeated or broadcast to them), and whether it gets a mask."""

    kernel: Kernel
    kv_heads: int
    mask: bool


def padding_mask(plan: Plan) -> bool:
    """Whether the batch has real padding, so transformers builds a (b, 1, s, s) mask:
    padded samples shorter than the sequence on average."""
    w = plan.workload
    mean = w.mean_sample_tokens
    return w.packing == "padded" and mean is not None and mean < plan.batch.seq_len


def attention_key(plan: Plan) -> str:
    """``runtime.attention``, with :data:`KV_EXPANDED` appended for an SDPA call the
    model code hands K/V copied to every query head, then :data:`PADDING_MASK` for one
    that gets a padding mask: what :func:`sdpa_call` reads of the plan."""
    attention: str = plan.runtime.attention
    if not attention.startswith("sdpa"):
        return attention
    if plan.runtime.kv_expanded:
        attention += KV_EXPANDED
    if padding_mask(plan):
        return attention + PADDING_MASK
    return attention


def sdpa_call(
    key: str, arch: ArchitectureSpec, heads: int, kv_heads: int, head_dim: int, v_dim: int
) -> SdpaCall:
    """The :class:`SdpaCall` of a layer with these (local) heads and head dims under the
    attention key ``key`` (:func:`attention_key`); see the module docstring."""
    attention = key.removesuffix(PADDING_MASK)
    expanded = attention.endswith(KV_EXPANDED)
    attention = attention.removesuffix(KV_EXPANDED)
    if attention == "eager":
        return SdpaCall("eager", heads, False)
    if attention in ("flash_attn", "flex"):  # flex: enable_gqa, no (b, 1, s, s) mask
        return SdpaCall("flash", kv_heads, False)
    grouped = kv_heads != heads
    if arch.family == "falcon":
        mask = True
        gqa = False
        seen = kv_heads if arch.kv_heads == 1 and arch.residual != "parallel_two_norms" else heads
    else:
        mask = key.endswith(PADDING_MASK)
        gqa = grouped and not mask and not expanded and head_dim == v_dim <= FLASH_MAX_HEAD_DIM
        seen = kv_heads if gqa or not grouped else heads  # repeat_kv, or the model's copies
    same_heads = seen == heads
    flash = (
        attention == "sdpa_flash"
        and not mask
        and head_dim == v_dim <= FLASH_MAX_HEAD_DIM
        and (same_heads or gqa)
    )
    if flash:
        return SdpaCall("flash", seen, mask)
    if same_heads:
        return SdpaCall("mem_efficient", seen, mask)
    return SdpaCall("math", seen, mask)


def math_backward_terms(key: str, arch: ArchitectureSpec, g: Geometry) -> list[Term]:
    """The math kernel's backward working set, when the layer runs it (else none):
    ``matmul(attn, v)``'s backward makes the fp32 (b, h, s, s) gradient of the
    probabilities and v's fp32 gradient per query head, and ``_safe_softmax``'s backward
    the fp32 gradient of the scores beside it (torch ``_scaled_dot_product_attention_math``
    under autograd) — two s × s fp32 tensors per head, larger than the MLP's gradients
    whenever s·h exceeds the intermediate width (Falcon-7B at s 1,024: 71 · 1,024 · 4 · 2 B
    a token against 3 · 18,176 · 2)."""
    call = sdpa_call(key, arch, g.heads_local, g.kv_local, g.head_dim, g.v_dim)
    if call.kernel != "math":
        return []
    return [
        Term(
            "grads of the probabilities and scores fp32 (s×s, math kernel)",
            g.heads_local * g.seq,
            4,
            count=2,
        ),
        Term("grad of v fp32 per query head (math kernel)", g.heads_local * g.v_dim, 4),
        Term("residual grads", g.hidden, g.residual_bytes, "seq", count=2),
    ]
