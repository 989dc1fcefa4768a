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
  backward one chunk's bf16 gradient more: 1,024 × 128,256 × 2 = 262,668,288 B at both
  ends — the saved chunk is the compiled graph's input, which AOT Autograd never donates
  (torch/_functorch/_aot_autograd/graph_compile.py ``collect_fw_donated_buffer_idxs``;
  tests/trace/test_compiled_ce_donation.py checks it with Inductor) (a frozen lm_head:
  LoRA);
- lm_head's backward when the head trains (the tied embedding of a full fine-tune, h
  3072), last chunk first: each chunk's weight gradient reaches the weight's input
  buffer as a view (``TBackward0``'s ``grad.t()`` of ``mm_mat2_backward``'s
  ``grad.t().mm(x).t()``, torch/csrc/autograd/FunctionsManual.cpp) whose base the view
  keeps, so ``InputBuffer::accumulate`` (torch/csrc/autograd/input_buffer.cpp,
  ``can_accumulate_inplace`` wants ``storage().use_count() == 1``) makes the first sum
  out of place: last chunk's product + the next one's + their sum,
  3 × 128,256 × 3072 × 2 = 2,364,014,592 B, next to the 6 chunks' bf16 gradients not
  yet done, 2,101,346,304 − 2 × 262,668,288 = 1,576,009,728 B: 3,940,024,320 B, net of
  the saved row (compiled 2,101,411,840) 1,838,612,480 B, more than the loss's own
  moment and than the product before it (7 chunks' 1,838,678,016 + 2 × 788,004,864 =
  3,414,687,744 B);
- eager: log_softmax keeps each chunk's fp32 output, T·V·4 = 4,202,692,608 B over the
  chunks; the forward holds every chunk's bf16 logits and one chunk's fp32 copy,
  2,101,346,304 + 1,024 × 128,256 × 4 = 2,626,682,880 B; the loss's backward a chunk's
  two fp32 gradients, 2 × 525,336,576 = 1,050,673,152 B.
"""

from __future__ import annotations

from typing import Any

from engine.estimate import estimate
from engine.ledger.activations.loss_torchtune import lm_head_moment
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


LORA = {"method__kind": "lora", "method__lora__targets": ["q", "v"]}


def test_compiled_chunked_output_keeps_bf16_logits_of_every_chunk() -> None:
    rows = rows_of(tune(workload__torch_compile=True, **LORA))
    saved = rows["hbm.loss.output_chunks"]
    assert saved.low == saved.high == 8_192 * 128_256 * 2 + 2 * 8_192 * 4 == 2_101_411_840
    back = rows["hbm.loss.output_chunks_backward"]
    assert back.high == 1_024 * 128_256 * 2 == 262_668_288
    assert back.low == back.high  # out of place: the saved input is never donated
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
    rows = rows_of(tune(workload__torch_compile=True, batch__seq_len=4100, **LORA))
    assert rows["hbm.loss.output_chunks_backward"].high == 263_181_312


def test_no_upcast_runs_the_cross_entropy_on_bf16_chunks() -> None:
    """LitGPT's ``chunked_cross_entropy`` (litgpt/utils.py) calls cross_entropy on each
    bf16 chunk of ``GPT.forward``'s list, no ``.float()``: the log-probs are bf16,
    T·V·2 = 2,101,346,304 B; the forward holds the logits alone (no fp32 copy); a chunk's
    two gradients are bf16, 2 × 1,024 × 128,256 × 2 = 525,336,576 B."""
    rows = rows_of(tune(runtime__logits_fp32_upcast=False, **LORA))
    assert rows["hbm.loss.output_chunks"].low == 2_101_346_304
    assert rows["hbm.loss.output_chunks_forward"].low == 2_101_346_304
    assert rows["hbm.loss.output_chunks_backward"].low == 525_336_576


def test_a_trained_lm_head_sums_its_chunk_gradients_out_of_place_first() -> None:
    """Full fine-tune of the tied 3B (module docstring): compiled, the first out-of-place
    sum 1,576,009,728 + 2,364,014,592 − 2,101,411,840 = 1,838,612,480 B is the loss's
    backward row (in place it would be 3,414,687,744 − 2,101,411,840 = 1,313,275,904);
    eager, the fp32 log-probs' saved row (4,202,692,608 B) already covers it and the
    loss's own 2 × 1,024 × 128,256 × 4 stays."""
    comp = rows_of(tune(workload__torch_compile=True))["hbm.loss.output_chunks_backward"]
    assert comp.low == comp.high == 1_576_009_728 + 2_364_014_592 - 2_101_411_840
    assert comp.low == 1_838_612_480
    assert "first out-of-place sum" in comp.formula
    eager = rows_of(tune())["hbm.loss.output_chunks_backward"]
    assert eager.low == 2 * 1_024 * 128_256 * 4


def test_chunks_wider_than_the_hidden_peak_at_the_second_product() -> None:
    """s 16,384 × micro-batch 2: k = 2 × 2,048 = 4,096 tokens a chunk > h 3,072, so the
    moment before the first sum is the larger: 7 chunks' gradients
    32,768 × 128,256 × 2 − 4,096 × 128,256 × 2 = 7,354,712,064 + 2 × 788,004,864 =
    8,930,721,792 B (the first sum: 6 chunks' 6,304,038,912 + 3 × 788,004,864 =
    8,668,053,504 B), net of the saved row 8,405,385,216 + 2 × 32,768 × 4 =
    8,405,647,360 B: 525,074,432 B; the compiled loss's own chunk gradient
    4,096 × 128,256 × 2 = 1,050,673,152 B is larger, and out of place at both ends (the
    saved chunk is the compiled graph's input, never donated), so it is the row."""
    moment, first = lm_head_moment(8_405_385_216, 1_050_673_152, 788_004_864, 8)
    assert (moment, first) == (8_930_721_792, False)
    assert moment - 8_405_647_360 == 525_074_432
    plan = tune(workload__torch_compile=True, batch__seq_len=16_384)
    back = rows_of(plan)["hbm.loss.output_chunks_backward"]
    assert back.low == back.high == 1_050_673_152


def test_a_single_token_has_one_chunk_and_no_sum() -> None:
    """s 1 × micro-batch 2: one chunk (``chunk`` of one position), so lm_head makes one
    weight gradient and sums nothing: 2 × 128,256 × 2 = 513,024 B of gradient +
    788,004,864, net of the saved row 513,024 + 2 × round_up(2 × 4, 512) = 514,048 B:
    788,003,840 B."""
    back = rows_of(tune(workload__torch_compile=True, batch__seq_len=1))
    assert back["hbm.loss.output_chunks_backward"].low == 788_003_840
