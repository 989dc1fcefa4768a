"""torchtune's own full fine-tune step traced op by op (tests/trace/tune_full.py).

A small llama3_2 (2 layers, hidden 256, 4 / 2 heads, MLP 512, vocab 32,768; batch 2 ×
512 tokens, 8 output chunks) where lm_head's backward is the step's peak, as it is for
the README table's 3B: the trace must land on the moment
engine/ledger/activations/loss_torchtune.py ``lm_head_moment`` names — the first,
out-of-place sum of the chunks' weight gradients (torch/csrc/autograd/input_buffer.cpp
``accumulate``: the products arrive as views) — and hold exactly the bytes the ledger's
rows at backward.start add up. Skipped without torchtune (``pip install torchtune==0.4.0
torchao==0.6.1 --no-deps`` plus omegaconf, tiktoken, sentencepiece, blobfile).
"""

from __future__ import annotations

import importlib.util

import pytest

from tests.trace.needs_extra import needs_trace_extra

pytestmark = [
    needs_trace_extra,
    pytest.mark.skipif(
        importlib.util.find_spec("torchtune") is None, reason="torchtune is not installed"
    ),
]

B, S, H, V, C = 2, 512, 256, 32_768, 8
K = B * S // C  # tokens of one chunk (tensor chunk of the sequence, per row)
BF16, FP32 = 2, 4
LAYER_ELEMENTS = (
    H * H  # q_proj
    + 2 * H * 128  # k_proj, v_proj: 2 kv heads × head_dim 64
    + H * H  # output_proj
    + 3 * 512 * H  # w1, w2, w3
    + 2 * H  # sa_norm, mlp_norm scales
)
P = V * H + 2 * LAYER_ELEMENTS + H  # tied embedding, 2 layers, final norm
TENSORS = 1 + 2 * 9 + 1
ROPE = 1024 * (64 // 2) * 2 * FP32 + 512  # Llama3ScaledRoPE cache [max_seq, hd/2, 2] + theta
BATCH = 2 * B * S * 8 + 512  # tokens, labels (int64) and the recipe's ignore column

STEADY = 2 * P + 2 * 2 * P + TENSORS * 512 + ROPE + BATCH
"""bf16 weights, AdamW's two bf16 moments, fused AdamW's fp32 step per tensor (512 B
each), the rope's fp32 buffers, the batch."""

HEAD_SUM = 3 * V * H * BF16 + (C - 2) * K * V * BF16
"""The first sum: both products (kept by their views) and their sum, next to the 6 chunks
whose logit gradients wait (recipes: compute_cross_entropy's backward ran for all)."""
LAYER_INPUTS = 2 * B * S * H * BF16  # the checkpointed layers' inputs (_NoopSaveInputs)
FINAL_NORM = B * S * H * FP32 + B * S * H * BF16 + B * S * FP32  # x_fp32, x_normed, rsqrt
HEAD_INPUT = B * S * H * BF16
"""The 8 folded chunk copies MmBackward saves (LinearAlgebra.cpp should_fold: a copy of the
non-contiguous chunk): 6 left, and the 2 chunks' input gradients in place of the done ones."""
SCALARS = 16 * 1024  # losses, token counts, the shifted labels: a few 512-B blocks


@pytest.fixture(scope="module")
def traced() -> dict[str, object]:
    from tests.trace import tune_full

    shape = tune_full.Shape(
        layers=2, hidden=H, heads=4, kv_heads=2, inter=512, vocab=V, max_seq_len=1024, seq=S
    )
    return {k: tune_full.trace(tune_full.CASES[k], shape) for k in ("opt-in-bwd", "act-offload")}


def test_the_steady_state_is_weights_moments_steps_rope_and_batch(traced: dict) -> None:
    assert traced["opt-in-bwd"].steady == STEADY


def test_the_peak_is_lm_heads_first_out_of_place_sum(traced: dict) -> None:
    t = traced["opt-in-bwd"]
    assert "TBackward0" in t.peak.where and "add.Tensor" in t.peak.where
    held = HEAD_SUM + LAYER_INPUTS + FINAL_NORM + HEAD_INPUT
    assert 0 <= t.peak.total - t.steady - held <= SCALARS


def test_offloading_holds_no_layer_input_at_the_head(traced: dict) -> None:
    """training/_activation_offloading.py: the final norm's five offloaded packs push the
    last layer's input out of the 5-id forward stash; fwd_stash empties only at the first
    unpacking node's hook, after lm_head's backward."""
    on, off = traced["act-offload"], traced["opt-in-bwd"]
    assert "TBackward0" in on.peak.where
    assert off.peak.total - on.peak.total == LAYER_INPUTS
