"""lm_head's backward moment of torchtune's chunked output, against torch's own autograd
engine on CPU (engine/ledger/activations/loss_torchtune.py ``lm_head_moment``).

Why a real run: the moment hinges on whether ``InputBuffer::accumulate``
(torch/csrc/autograd/input_buffer.cpp) sums the chunks' weight gradients in place. Each
arrives as a view (``F.linear`` on a 3-D chunk is ``matmul(x, weight.t())``; its weight
gradient is ``TBackward0``'s ``grad.t()`` of ``mm_mat2_backward``'s ``grad.t().mm(x).t()``)
that keeps its base alive, so ``can_accumulate_inplace`` (``storage().use_count() == 1``)
refuses the first sum; the sum is a fresh tensor and the later chunks add into it. A
tracer under a dispatch mode cannot show this (``isTensorSubclassLike`` is true under
any mode, and every sum is then out of place): the replica runs plain tensors under the
profiler's allocation timeline instead.

Replica (scaled, the shape of torchtune's ``TransformerDecoder.chunked_output`` with
``CEWithChunkedOutputLoss``): x [2, 512, 384] bf16 split in 8 along the sequence, each
chunk through ``F.linear`` with a trained [4096, 384] bf16 weight; a stand-in for the
compiled ``compute_cross_entropy`` keeps its bf16 chunk and returns one bf16 gradient.
k = 128 tokens a chunk: u = 128 × 4096 × 2 = 1,048,576 B a chunk's logits, T·V·c = 8u,
the weight's gradient 4096 × 384 × 2 = 3u. Hand-derived: the first sum holds 3 × 3u next
to the 6 chunks not done (6u) = 15u; in place it would be the product before it,
7u + 2 × 3u = 13u. Beside them the chunks' folded input copies (mm's saved ``mat1``,
LinearAlgebra.cpp ``should_fold``) and, for the two chunks done, their input gradients
in SplitBackward's buffer: 8 × 128 × 384 × 2 = 786,432 B; the stand-in's per-row fp32
statistics and labels add 8 × (512 + 1,024) B.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch.profiler import ProfilerActivity, profile
from torch.profiler._memory_profiler import Action

from engine.ledger.activations.loss_torchtune import lm_head_moment

B, S, H, V, CHUNKS = 2, 512, 384, 4096, 8
K = B * S // CHUNKS
U = K * V * 2
SMALL = CHUNKS * (K * 4 + K * 8)  # the stand-in's lse (fp32) and labels (int64) a chunk


class _CompiledCrossEntropy(torch.autograd.Function):  # type: ignore[misc]
    """Stands in for torchtune's compiled ``compute_cross_entropy``: saves its bf16 chunk
    and fp32 per-row log-sum-exp, returns one bf16 gradient of the chunk's size."""

    @staticmethod
    def forward(ctx: Any, logits: Any, labels: Any) -> Any:
        with torch.no_grad():
            lse = torch.logsumexp(logits.float(), dim=-1)
        ctx.save_for_backward(logits, lse, labels)
        return (lse - logits.gather(1, labels[:, None]).squeeze(1).float()).sum()

    @staticmethod
    def backward(ctx: Any, g: Any) -> Any:
        logits, lse, _ = ctx.saved_tensors
        out = logits.clone()
        out.sub_(lse[:, None].to(out.dtype)).exp_().mul_(g.to(out.dtype))
        return out, None


def _backward_peak_bytes() -> int:
    """Live bytes at the step's peak, counting what the profiled forward and backward
    allocate (the weight and the input are made before it)."""
    torch.manual_seed(0)
    weight = torch.randn(V, H, dtype=torch.bfloat16, requires_grad=True)
    x = torch.randn(B, S, H, dtype=torch.bfloat16, requires_grad=True)
    labels = torch.randint(0, V, (B, S))
    with profile(
        activities=[ProfilerActivity.CPU], profile_memory=True, record_shapes=True, with_stack=True
    ) as prof:
        chunks = [F.linear(c, weight) for c in x.chunk(CHUNKS, dim=1)]
        rows = [c.reshape(-1, V) for c in chunks]
        loss = sum(
            _CompiledCrossEntropy.apply(r, lab.reshape(-1))
            for r, lab in zip(rows, labels.chunk(CHUNKS, dim=1), strict=True)
        )
        del chunks, rows  # the recipe's ``del logits``
        loss.backward()
    live = peak = 0
    for _, action, _, size in prof._memory_profile().timeline:
        if action == Action.CREATE:
            live += size
        elif action == Action.DESTROY:
            live -= size
        peak = max(peak, live)
    return peak


def test_torch_sums_the_chunks_weight_gradients_out_of_place_first() -> None:
    moment, first = lm_head_moment(CHUNKS * U, U, 3 * U, CHUNKS)
    assert (moment, first) == (15 * U, True)
    beside = B * S * H * 2 + SMALL  # folded copies / input gradients, lse and labels
    peak = _backward_peak_bytes()
    assert abs(peak - (moment + beside)) <= 64 * 1024, peak
    assert peak - (13 * U + beside) > U  # not the in-place sum's moment
