"""Loss implementations per stack (``runtime.loss_impl``) and zero_grad's gradients,
hand-derived for Llama-3.1-8B (V 128,256, h 4096) at T = 16,384 tokens (s 8192,
micro-batch 2), bf16 logits (2 B), FSDP2 over 8 ranks.

- eager (``cross_entropy(pred.float(), labels)``, torchtitan at 9dec370 ``train.py``
  ``loss_fn``; HF's causal-LM loss): fp32 log-probs kept, T·V·4 = 8,405,385,216 B;
- compiled (torchtitan ``components/loss.py`` ``BaseLoss._maybe_compile``): the bf16
  logits T·V·2 = 4,202,692,608 B and two fp32 per-row statistics 2 × T·4 = 131,072 B
  kept, the bf16 gradient T·V·2 in the loss's backward, no fp32 T × V;
- torchtitan chunked (``ChunkedLossWrapper``, 8 chunks of k = 2048 tokens): one chunk's
  bf16 logits k·V·2 = 525,336,576 and three fp32 k·V·4 = 3 × 1,050,673,152 in its
  backward: 3,677,356,032 B; the fp32 hidden-gradient accumulator T·h·4 = 268,435,456 B;
  under FSDP2 lm_head's unsharded fp32 gradient V·h·4 = 2,101,346,304 B.
"""

from __future__ import annotations

from engine.estimate import estimate
from engine.ledger.row import Row
from engine.plan import Plan, with_values
from tests.engine.ledger.test_torchtitan_profile import titan

TV = 16_384 * 128_256


def rows_of(plan: Plan) -> dict[str, Row]:
    return {r.id: r for r in estimate(plan).heaviest.rows}


def test_eager_loss_keeps_fp32_log_probs() -> None:
    rows = rows_of(titan(runtime__loss_impl="eager"))
    assert rows["hbm.loss.saved"].low == TV * 4 == 8_405_385_216
    assert rows["hbm.loss.backward_transient"].low == 2 * TV * 4
    assert "hbm.loss.labels" not in rows  # HF's padded labels: not torchtitan's


def test_compiled_loss_keeps_bf16_logits_only() -> None:
    rows = rows_of(titan(runtime__loss_impl="compiled"))
    assert rows["hbm.loss.compiled_logits"].low == TV * 2 + 2 * 16_384 * 4 == 4_202_823_680
    assert rows["hbm.loss.compiled_backward"].low == TV * 2 == 4_202_692_608
    assert not {"hbm.loss.saved", "hbm.loss.forward_transient"} & set(rows)
    # the same under the pytorch stack: the mode, not the stack, decides the rows
    plain = rows_of(titan(stack__name="pytorch", runtime__loss_impl="compiled"))
    assert plain["hbm.loss.compiled_logits"].low == 4_202_823_680


def test_torchtitan_chunked_loss_under_fsdp2() -> None:
    """The loop's peak is the largest of its moments: a chunk's temporaries,
    3,677,356,032 B, or the last chunk's — the reduce-scatter's fp32 input V·h·4, the
    chunk's bf16 weight gradient V·h·2, its logits' gradient k·V·2 and ``h_chunk.grad``
    k·h·2 (torchtitan 0.3.0 ``components/loss.py`` ``ChunkedLossWrapper.__call__``:
    ``h_chunk.grad = None`` only after ``chunk_loss.backward()`` returns) =
    3,694,133,248 B, the larger; plus, at micro-batch 2, the 8 contiguous chunk copies
    of the hidden states (``_chunk_local``'s ``.contiguous()`` of a strided split),
    8 × 2048·4096·2 = 134,217,728 B; next to the accumulated gradient and the
    accumulator: 6,198,132,736 B (5.77 GiB) at the loss, in forward."""
    rows = rows_of(titan())
    chunk = 2048 * 128_256 * 2 + 3 * 2048 * 128_256 * 4
    assert chunk == 3_677_356_032
    last = 128_256 * 4096 * (4 + 2) + 2048 * 128_256 * 2 + 2048 * 4096 * 2
    assert last == 3_694_133_248
    copies = 8 * 2048 * 4096 * 2
    assert rows["hbm.loss.chunk"].low == last + copies == 3_828_350_976
    assert rows["hbm.loss.grad_accumulator"].low == 16_384 * 4096 * 4 == 268_435_456
    assert rows["hbm.loss.lm_head_grad"].low == 128_256 * 4096 * 4 == 2_101_346_304
    for rid in ("hbm.loss.chunk", "hbm.loss.lm_head_grad"):
        assert rows[rid].moments == frozenset({"forward"})
    assert "backward.start" in rows["hbm.loss.grad_accumulator"].moments
    total = sum(rows[r].low for r in ("hbm.loss.chunk", "hbm.loss.grad_accumulator"))
    assert total + rows["hbm.loss.lm_head_grad"].low == 6_198_132_736


def test_chunked_lm_head_gradient_only_under_fsdp_and_split_by_tp() -> None:
    """DDP keeps lm_head's gradient in ``.grad`` (no unsharded accumulation row); under
    TP 2 (loss parallel) each rank's logits and lm_head are V / 2 = 64,128 wide; the
    hidden states enter lm_head replicated, so ``h_chunk.grad`` and the chunk copies
    keep the full h: last chunk 64,128·4096·6 + 2048·64,128·2 + 2048·4096·2 =
    1,855,455,232 B (> the chunk's 1,838,678,016), + 8 copies 134,217,728 B."""
    ddp = rows_of(titan(parallelism__strategy="ddp", parallelism__dp=1))
    assert "hbm.loss.lm_head_grad" not in ddp
    tp = rows_of(titan(parallelism__tp=2, parallelism__dp=4))
    assert tp["hbm.loss.lm_head_grad"].low == 64_128 * 4096 * 4
    assert 2048 * 64_128 * 2 + 3 * 2048 * 64_128 * 4 == 1_838_678_016
    last = 64_128 * 4096 * 6 + 2048 * 64_128 * 2 + 2048 * 4096 * 2
    assert tp["hbm.loss.chunk"].low == last + 8 * 2048 * 4096 * 2 == 1_989_672_960


def test_chunked_loss_makes_the_forward_the_peak() -> None:
    """Per-op SAC's 33,353,105,408 B of layers and the chunked loss's 6 GB: the loss in
    forward (every layer saved, the loop's tensors) outweighs the loss's backward, whose
    logits are gone."""
    est = estimate(titan(runtime__zero_grad="set_to_none")).heaviest
    assert est.peak_phase == "forward"


def test_zero_fill_keeps_gradients_through_the_next_forward() -> None:
    """``zero_grad(set_to_none=False)``: FSDP2's fp32 gradient shards, 4 × 8.03e9 / 8 =
    4,015,130,624 B, live at every moment — steady and forward grow by exactly that, and
    backward.end no longer needs the gradients-made-so-far row."""
    kept, freed = titan(), titan(runtime__zero_grad="set_to_none")
    grads = rows_of(kept)["hbm.grads"]
    assert grads.low == 4_015_130_624
    assert {"steady", "forward", "backward.start", "optimizer"} <= grads.moments
    k, f = estimate(kept).heaviest.moments, estimate(freed).heaviest.moments
    for moment in ("steady", "forward", "backward.start"):
        assert k[moment].low - f[moment].low == 4_015_130_624
    assert "hbm.grads.before_first_layer" not in rows_of(kept)
    assert "hbm.grads.before_first_layer" in rows_of(freed)
    assert k["optimizer"] == f["optimizer"]


def test_other_stacks_keep_set_to_none() -> None:
    plan = with_values(titan(), {"stack.name": "pytorch"})
    assert "steady" not in rows_of(plan)["hbm.grads"].moments


def test_chunked_loop_takes_the_largest_moment() -> None:
    """fp32 training (c = 4), s 4096, micro-batch 1: k = 512 tokens a chunk. A chunk's
    logits and cross-entropy backward 512·V·(4 + 12) = 8192·V; a later chunk's
    weight-gradient matmul, its logits and their gradient 2 × 512·V·4 with lm_head's
    fresh gradient V·4096·4: 20,480·V; the last chunk (FSDP2 ``foreach_reduce``): the
    reduce-scatter's fp32 input 4096·V·4, the chunk's weight gradient 4096·V·4 it was
    copied from (freed after the scatter), the chunk's logits gradient 512·V·4 that
    lm_head's backward still holds and ``h_chunk.grad`` 512·4096·4 (torchtitan 0.3.0
    ``ChunkedLossWrapper.__call__`` drops it after ``chunk_loss.backward()``):
    34,816·V + 8,388,608 = 4,473,749,504 B, the largest (the traced grid's last-chunk
    moment, ``docs/fidelity-grid.md``); one sequence, so no chunk copies."""
    plan = titan(
        method__precision__policy="fp32",
        method__precision__compute_dtype="fp32",
        batch__seq_len=4096,
        batch__micro_batch=1,
    )
    chunk = rows_of(plan)["hbm.loss.chunk"]
    assert chunk.low == (16_384 + 16_384 + 2048) * 128_256 + 512 * 4096 * 4 == 4_473_749_504


def test_eager_loss_under_torchtitan_loss_parallel() -> None:
    """TP 2 (DP 4): torchtitan enters ``loss_parallel()`` and keeps the logits
    ``Shard(-1)``, so each rank's eager loss runs DTensor's ops on V / 2 = 64,128 columns
    (``torch/distributed/tensor/parallel/loss.py``). With X = T·64,128·4 =
    4,202,692,608 B: ``_log_softmax`` holds the fp32 input, ``shifted = x - x_max`` and
    the result, so the forward transient is the bf16 logits X / 2 plus the upcast and
    ``shifted`` (2 X) = 10,506,731,520 B next to the saved log-probs X;
    ``_nll_loss_and_log_softmax_backward``'s ``(zeros_like(x) + exp(x)) * grad_output``
    holds the zeros, the exp and the sum (then the product) beside the saved x: 3 X of
    backward temporaries, 12,608,077,824 B (ATen's log_softmax backward: 2 X). The plain
    PyTorch stack under TP (hf-transformers profile, its logits whole on every rank, no
    DTensor loss) keeps ATen's two full-vocabulary buffers, 2 · T·V·4."""
    x = 16_384 * 64_128 * 4
    rows = rows_of(titan(runtime__loss_impl="eager", parallelism__tp=2, parallelism__dp=4))
    assert rows["hbm.loss.saved"].low == x == 4_202_692_608
    assert rows["hbm.loss.forward_transient"].low == x // 2 + 2 * x == 10_506_731_520
    assert rows["hbm.loss.backward_transient"].low == 3 * x == 12_608_077_824
    one_rank = rows_of(titan(runtime__loss_impl="eager"))  # TP 1: ATen's kernels
    assert one_rank["hbm.loss.backward_transient"].low == 2 * TV * 4
    plain = rows_of(
        titan(
            stack__name="pytorch",
            runtime__loss_impl="eager",
            parallelism__tp=2,
            parallelism__dp=4,
        )
    )
    assert plain["hbm.loss.backward_transient"].low == 2 * TV * 4
