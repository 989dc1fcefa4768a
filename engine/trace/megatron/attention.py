"""The one model deviation: a core attention that runs SDPA, in the layer spec's slot.

Megatron-Core's ``local`` spec attends with ``transformer/dot_product_attention.py``
``DotProductAttention``, which materialises the (B·heads, S, S) scores and
probabilities (``torch.baddbmm`` into ``GlobalMemoryBuffer``, softmax, ``bmm``) and
saves them for backward. Production runs use Transformer Engine's fused attention
(``TEDotProductAttention``: cuDNN / flash), which saves only the output and an fp32
log-sum-exp per query row — what the ledger's ``megatron`` activation profile
describes — and TE is CUDA-only. :class:`SdpaCoreAttention` takes the same inputs
(``[s, b, heads, d]`` query, ``[s, b, groups, d]`` key / value) and returns the same
``[s, b, heads·d]`` output through ``F.scaled_dot_product_attention``; on fake CPU
tensors SDPA picks the flash kernel, whose saved set is TE's (shared/reference/tracing.md).
It is put into ``SelfAttentionSubmodules.core_attention`` (``model.py``); everything
else in the layer is Megatron's.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as functional


class SdpaCoreAttention(torch.nn.Module):  # type: ignore[misc]
    """Causal SDPA with GQA, the ``core_attention`` constructor signature of the spec."""

    def __init__(
        self,
        config: Any,
        layer_number: int,
        attn_mask_type: Any,
        attention_type: str,
        attention_dropout: float | None = None,
        softmax_scale: float | None = None,
        cp_comm_type: str | None = None,
        pg_collection: Any = None,
    ) -> None:
        super().__init__()
        self.config = config
        self.scale = softmax_scale
        self.gqa = config.num_query_groups != config.num_attention_heads

    def forward(
        self,
        query: Any,
        key: Any,
        value: Any,
        attention_mask: Any,
        attn_mask_type: Any = None,
        attention_bias: Any = None,
        packed_seq_params: Any = None,
    ) -> Any:
        seq, batch = query.shape[0], query.shape[1]
        q, k, v = (t.permute(1, 2, 0, 3) for t in (query, key, value))
        out = functional.scaled_dot_product_attention(
            q, k, v, is_causal=True, scale=self.scale, enable_gqa=self.gqa
        )
        # [b, heads, s, d] → [s, b, heads·d]: a view when b == 1 (the kernel's output
        # is laid out [b, s, heads, d]), as TE's sbhd output is
        return out.permute(2, 0, 1, 3).reshape(seq, batch, -1)
