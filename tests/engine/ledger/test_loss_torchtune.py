"""torchtune's chunked-output cross-entropy (``runtime.loss_impl = chunked_output``,
engine/ledger/activations/loss_torchtune.py), hand-derived for Llama-3.2-3B (V 128,256)
at s 4096 × micro-batch 2 = T 8,192 tokens, bf16 logits (2 B), one GPU.

torchtune's ``TransformerDecoder.chunked_output`` (torchtune/modules/transformer.py)
runs lm_head on all 8 chunks in forward (the 16-bit logits of every chunk live together,
T·V·2 = 2,101,346,304 B); ``CEWithChunkedOutputLoss.compute_cross_entropy``
(torchtune/modules/loss/ce_chunked_output_loss.py) upcasts and runs cross-entropy one
chunk of k = 2 × 4096 / 8 = 1,024 tokens at a time.

- compiled (``compile: True``, torchtune/training/_compile.py ``compile_loss`` compiles
  ``compute_cross_entropy`` alone): every chunk's graph keeps its bf16 logits and fp32
  max / log-sum-exp: 2,101,346,304 + 2 × 8,192 × 4 = 2,101,411,840 B; in the loss's
  backward one chunk's bf16 gradient more: 1,024 × 128,256 × 2 = 262,668,288 B;
- eager: log_softmax keeps each chunk's fp32 output, T·V·4 = 4,202,692,608 B over the
  chunks; the forward holds every chunk's bf16 logits and one chunk's fp32 copy,
  2,101,346,304 + 1,024 × 128,256 × 4 = 2,626,682,880 B; the loss's backward a chunk's
  two fp32 gradients, 2 × 525,336,576 = 1,050,673,152 B.
"""

from __future__ import annotations

from typing import Any

from engine.estimate import estimate
from engine.ledger.row import Row
from engine.plan import Plan, with_values
from engine.presets import plan_for_model_preset

CASE = {
    "stack.name": "pytorch",
    "parallelism.strategy": "ddp",
    "parallelism.dp": 1,
    "batch.seq_len": 4096,
    "batch.micro_batch": 2,
    "method.precision.policy": "pure_16bit",
    "method.recompute.policy": "full",
    "runtime.loss_impl": "chunked_output",
}


def tune(**changes: Any) -> Plan:
    sets = {**CASE, **{k.replace("__", "."): v for k, v in changes.items()}}
    return with_values(plan_for_model_preset("llama-3.2-3b"), sets)


def rows_of(plan: Plan) -> dict[str, Row]:
    return {r.id: r for r in estimate(plan).heaviest.rows}


def test_compiled_chunked_output_keeps_bf16_logits_of_every_chunk() -> None:
    rows = rows_of(tune(workload__torch_compile=True))
    saved = rows["hbm.loss.output_chunks"]
    assert saved.low == saved.high == 8_192 * 128_256 * 2 + 2 * 8_192 * 4 == 2_101_411_840
    assert rows["hbm.loss.output_chunks_backward"].low == 1_024 * 128_256 * 2 == 262_668_288
    assert "hbm.loss.output_chunks_forward" not in rows  # no fp32 chunk is materialised
    assert {"forward", "backward.start"} <= saved.moments
    assert rows["hbm.loss.output_chunks_backward"].moments == frozenset({"backward.start"})
    assert saved.source == "torchtune-chunked-output-loss"


def test_eager_chunked_output_keeps_fp32_log_probs_of_every_chunk() -> None:
    rows = rows_of(tune())
    assert rows["hbm.loss.output_chunks"].low == 8_192 * 128_256 * 4 == 4_202_692_608
    assert rows["hbm.loss.output_chunks_forward"].low == 2_626_682_880
    assert rows["hbm.loss.output_chunks_forward"].moments == frozenset({"forward"})
    assert rows["hbm.loss.output_chunks_backward"].low == 2 * 1_024 * 128_256 * 4


def test_chunked_output_is_not_the_recomputing_chunked_loss() -> None:
    """The generic chunked loss (``runtime.loss_impl`` chunked) recomputes each chunk's
    logits and keeps none; torchtune's keeps every chunk's: more bytes at the loss."""
    ours = rows_of(tune(workload__torch_compile=True))
    generic = rows_of(tune(workload__torch_compile=True, runtime__loss_impl="chunked"))
    assert "hbm.loss.saved" not in generic
    assert ours["hbm.loss.output_chunks"].low > max(
        r.low for r in generic.values() if "loss" in r.id
    )


def test_odd_sequence_chunks_round_up() -> None:
    """s 4100 splits into chunks of ceil(4100 / 8) = 513 tokens (``tensor_split``'s first
    chunks are the larger): k = 2 × 513 = 1,026 tokens, its bf16 gradient
    1,026 × 128,256 × 2 = 263,181,312 B."""
    rows = rows_of(tune(workload__torch_compile=True, batch__seq_len=4100))
    assert rows["hbm.loss.output_chunks_backward"].low == 263_181_312


def test_no_upcast_runs_the_cross_entropy_on_bf16_chunks() -> None:
    """LitGPT's ``chunked_cross_entropy`` (litgpt/utils.py) calls cross_entropy on each
    bf16 chunk of ``GPT.forward``'s list, no ``.float()``: the log-probs are bf16,
    T·V·2 = 2,101,346,304 B; the forward holds the logits alone (no fp32 copy); a chunk's
    two gradients are bf16, 2 × 1,024 × 128,256 × 2 = 525,336,576 B."""
    rows = rows_of(tune(runtime__logits_fp32_upcast=False))
    assert rows["hbm.loss.output_chunks"].low == 2_101_346_304
    assert rows["hbm.loss.output_chunks_forward"].low == 2_101_346_304
    assert rows["hbm.loss.output_chunks_backward"].low == 525_336_576
