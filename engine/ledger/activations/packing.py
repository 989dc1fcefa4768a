"""Padding-free packing: the low end of the activations holds only real tokens.

With ``workload.packing == "packed"`` the micro-batch's samples are concatenated without
padding (transformers ``DataCollatorWithFlattening``: "concatenates the entire mini batch
into a single long sequence", flash-attention's variable-length kernels keep the samples
apart; source ``hf-padding-free``). Every per-token tensor a layer saves then scales with
the real tokens of the micro-batch instead of ``micro_batch × seq_len``: on average
``micro_batch × mean_sample_tokens``, and up to ``micro_batch × seq_len`` when a
micro-batch draws the longest samples. So the activation rows keep their high end (the
heaviest micro-batch decides fit) and their low end scales by the share of real tokens,
``mean_sample_tokens / seq_len``. Padded batches keep every position: no change.

The share applies to the per-layer activations (saved tensors and the backward working
set, which dominate); the loss's logits and the batch tensors stay sized for a full
micro-batch at both ends (a small, safe over-count at the low end).
"""

from __future__ import annotations

from collections.abc import Callable

from engine.plan import Plan

SOURCE = "hf-padding-free"


def real_token_share(plan: Plan) -> float:
    """Share of a micro-batch's token positions that hold real tokens on average (1.0
    when padded, or when the samples fill the sequence)."""
    w = plan.workload
    if w.packing != "packed" or w.mean_sample_tokens is None:
        return 1.0
    return min(1.0, w.mean_sample_tokens / plan.batch.seq_len)


def band_of(plan: Plan) -> Callable[[int], tuple[int, int]]:
    """The activation band's low–high of ``n`` bytes (packing lowers the low end), as a
    function of the bytes: the plan read once (every stage of a pipeline bands its saved
    activations)."""
    b = plan.runtime.activation_band
    low, high, share = b.low, b.high, real_token_share(plan)

    def band(n: int) -> tuple[int, int]:
        return int(n * low * share), int(n * high)

    return band


def packing_formula(plan: Plan) -> str:
    """The packing step of an activation row's formula ("" when it does not apply)."""
    share = real_token_share(plan)
    if share >= 1.0:
        return ""
    tokens = plan.workload.mean_sample_tokens
    return (
        f"; packed without padding: low end × {tokens:,}/{plan.batch.seq_len:,} = "
        f"{share:.4f} (mean sample length; high end = a micro-batch of the longest "
        f"samples) [{SOURCE}]"
    )
