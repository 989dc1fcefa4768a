"""The torchtitan activation profile, hand-derived (engine/ledger/activations/torchtitan.py).

Llama-3.1-8B (h 4096, 32 heads, 8 K/V heads, d 128, I 14336, 32 layers), torchtitan on
FSDP2 over 8 ranks, s 8192, micro-batch 2: T = 16,384 tokens, bf16 activations (FSDP2's
MixedPrecisionPolicy casts the parameters, so the residual stream is bf16: 2 B). Every
term's T·width·bytes is a multiple of the 512-B allocation granularity here, so the
rounding never bites. Per token:

- per-op SAC (torchtitan ``distributed/activation_checkpoint.py`` ``SelectiveAC._wrap_block``;
  ``parallelisms/parallelize_llama.py`` ``_apply_ac_to_transformer_block`` at 9dec370):
  mms run wq, wk, wv, wo, w1, w3, w2 (``models/llama3/model.py`` ``Attention.forward``,
  ``FeedForward.forward``); odd ``forward_mm_count`` are cached — wq 4096·2, wv 1024·2,
  w1 14336·2, w2 4096·2 — plus the flash attention output 4096·2 and fp32 logsumexp
  32·4, and the block input 4096·2:
  8192 + 8192 + 2048 + 8192 + 128 + 28672 + 8192 = 63,616 B;
- none (``TransformerBlock.forward``'s autograd set): two RMSNorms (input 8192 + fp32
  rstd 4, output 8192 kept by the projections, each), q 8192, k and v 2 × 2048, attention
  output 8192, logsumexp 128, the SwiGLU's four 14336·2 tensors:
  2 × (8192 + 4 + 8192) + 8192 + 4096 + 8192 + 128 + 114,688 = 168,072 B;
- full (``FullAC``): the block input, 8192 B.
"""

from __future__ import annotations

from typing import Any

from engine.estimate import estimate
from engine.ledger.activations.stage_layers import stage_layers
from engine.ledger.row import Row
from engine.plan import Plan, with_values
from engine.presets import plan_for_model_preset
from engine.stacks.defaults import resolved
from engine.units import GiB

T = 2 * 8192
SAC_PER_TOKEN = 8192 + 8192 + 2048 + 8192 + 128 + 28672 + 8192
NONE_PER_TOKEN = 2 * (8192 + 4 + 8192) + 8192 + 4096 + 8192 + 128 + 4 * 28672
FULL_PER_TOKEN = 8192
WORKSPACES = 2 * 33_554_432
"""The forward's and backward's cuBLAS workspaces on H100 (CublasHandlePool.cpp: 32 MiB per
(handle, stream) on Hopper, allocated through the caching allocator)."""

CASE: dict[str, Any] = {
    "stack.name": "torchtitan",
    "parallelism.strategy": "fsdp2",
    "parallelism.dp": 8,
    "batch.seq_len": 8192,
    "batch.micro_batch": 2,
    "hardware.accelerator": "h100-sxm-80gb",
    "hardware.hbm_bytes": 103079215104,
    "hardware.usable_policy": "custom",
    "hardware.usable_hbm_bytes": 102005473280,
    "runtime.qkv_fusion": "as_model",  # the Dec-2024 code's wq / wk / wv
    "runtime.rope_cache": "per_model",  # and its one freqs_cis of 2 × seq_len positions
}
"""The shared case torchtitan-8b-fsdp8-sac (../shared/reference/published/dev.jsonl)."""


def titan(**changes: Any) -> Plan:
    sets = {**CASE, **{k.replace("__", "."): v for k, v in changes.items()}}
    return with_values(plan_for_model_preset("llama-3.1-8b"), sets)


def rows_of(plan: Plan) -> dict[str, Row]:
    return {r.id: r for r in estimate(plan).heaviest.rows}


def test_the_stack_derives_its_own_profile_and_step() -> None:
    """torchtitan: its own profile, per-op SAC, the chunked loss of its llama3 configs
    (``ChunkedLossWrapper``, compile off by default), ``zero_grad(set_to_none=False)``
    (``trainer.py`` ``train_step``); the other stacks keep theirs."""
    rt, rec = resolved(titan()).runtime, resolved(titan()).method.recompute
    assert (rt.activation_profile, rec.policy) == ("torchtitan", "selective")
    assert (rt.loss_impl, rt.zero_grad) == ("chunked", "zero_fill")
    plain = resolved(titan(stack__name="pytorch")).runtime
    assert (plain.activation_profile, plain.loss_impl, plain.zero_grad) == (
        "hf-transformers",
        "eager",
        "set_to_none",
    )
    mega = resolved(titan(stack__name="megatron_core", parallelism__strategy="megatron_distopt"))
    assert mega.runtime.loss_impl == "vocab_parallel"
    # runtime.loss set to fused or chunked says what runs, whatever the stack
    assert resolved(titan(runtime__loss="fused")).runtime.loss_impl == "fused"


def test_op_sac_keeps_the_cached_outputs_of_every_layer() -> None:
    """Per-op SAC: every block is a checkpointed one keeping 63,616 B a token —
    16,384 × 63,616 = 1,042,284,544 B a layer, × 32 = 33,353,105,408 B; the block's
    whole saved set (168,072 B a token: 2,753,691,648 B) is what its backward
    recomputes."""
    sl = stage_layers(resolved(titan()), 0)
    assert (sl.n_layers, sl.n_ckpt) == (32, 32)
    assert sl.ckpt_bytes == T * SAC_PER_TOKEN == 1_042_284_544
    assert sl.kinds[0].bytes == T * NONE_PER_TOKEN == 2_753_691_648
    assert sl.one_bytes == 32 * 1_042_284_544 == 33_353_105_408


def test_no_ac_and_full_ac() -> None:
    """none: 32 × 2,753,691,648 = 88,118,132,736 B; full: 32 × 16,384 × 8192 =
    4,294,967,296 B."""
    none = stage_layers(resolved(titan(method__recompute__policy="none")), 0)
    full = stage_layers(resolved(titan(method__recompute__policy="full")), 0)
    assert (none.n_ckpt, none.one_bytes) == (0, 32 * T * NONE_PER_TOKEN)
    assert none.one_bytes == 88_118_132_736
    assert (full.n_ckpt, full.one_bytes) == (32, 32 * T * FULL_PER_TOKEN)
    assert full.one_bytes == 4_294_967_296


def test_layer_sac_checkpoints_every_kth_counting_from_one() -> None:
    """Layer SAC every 3 (parallelize_llama.py at 9dec370: ``_count`` starts at 1, a
    block is wrapped when ``_count % 3 == 0``): blocks 2, 5, …, 29 — 10 of 32 — keep
    their input, 22 their whole set: 22 × 2,753,691,648 + 10 × 134,217,728 =
    61,923,393,536 B. transformers' every-3 takes blocks 0, 3, …, 30 (11 of them)."""
    plan = titan(method__recompute__policy="every_k", method__recompute__every_k=3)
    sl = stage_layers(resolved(plan), 0)
    assert (sl.n_ckpt, sl.n_plain) == (10, 22)
    assert sl.one_bytes == 22 * T * NONE_PER_TOKEN + 10 * T * FULL_PER_TOKEN == 61_923_393_536
    hf = stage_layers(
        resolved(with_values(plan, {"runtime.activation_profile": "hf-transformers"})), 0
    )
    assert hf.n_ckpt == 11


def test_op_sac_backward_recomputes_the_block() -> None:
    """The working set under per-op SAC: the dense working set (3 × 14336·2 MLP grads +
    2 × 4096·2 residual grads = 102,400 B a token: 1,677,721,600 B) plus the recomputed
    block 2,753,691,648 less its own cached 1,042,284,544 = 3,389,128,704 B, × the
    activation band low 0.98 = 3,321,346,129 B."""
    w = rows_of(titan())["hbm.activations.working.layer"]
    assert w.low == int((T * 102_400 + T * NONE_PER_TOKEN - T * SAC_PER_TOKEN) * 0.98)
    assert w.low == 3_321_346_129


def test_sac_under_sequence_parallelism_keeps_the_reduce_scatters() -> None:
    """TP 2 + SP (``SelectiveAC``'s save list holds ``reduce_scatter_tensor``): the block
    input and the two reduce-scatter outputs (wo's, w2's) cover T / 2 tokens, 8192 B
    each there — 4096 + 2 × 4096 a token of the micro-batch; the cached wq, wv, attention
    and w1 outputs are the rank's 16 heads, 4 K/V heads and 7168 MLP columns (2048·2,
    512·2, 2048·2 + fp32 logsumexp 16·4, 7168·2), w2's partial output is whole (4096·2):
    4096 + 8192 + 4096 + 1024 + 4096 + 64 + 14336 + 8192 = 44,096 B a token."""
    plan = titan(parallelism__tp=2, parallelism__sequence_parallel=True, parallelism__dp=4)
    sl = stage_layers(resolved(plan), 0)
    assert sl.ckpt_bytes == T * 44_096


def test_the_benchmark_case_as_torchtitan_ran_it() -> None:
    """The shared case at 9dec370 (Dec 2024): per-op SAC, the eager loss
    ``cross_entropy(pred.flatten(0, 1).float(), labels)`` and ``optimizers.zero_grad()``
    (set_to_none=True). Allocated peak at the loss's backward: the states 4 × 4,015,130,624,
    the SAC layers 33,353,105,408 × 0.98–1.05, the fp32 log-probs and the loss backward's
    two fp32 T × V (3 × 16,384·128,256·4 = 25,216,155,648), the head, FSDP2's head unit
    (norm + lm_head, 1,050,681,344; 0.3's ``apply_fsdp_to_decoder`` units: the embedding
    is resharded after forward and no layer's all-gather buffer waits through the loss,
    1,050,673,152 + 436,224,000 B less than the one-root-unit count's 67.8–69.9 GiB), the
    model's one freqs_cis buffer (2·8192 positions × 64 complex64, 8,388,608 B):
    66.4–68.6 GiB (measured: 82.4 GiB reserved, so about 72–74 GiB allocated with
    torchtitan #165's 8.6–9.9 GiB reserve gap; 9dec370 wrapped the root differently —
    ``fully_shard(model)`` resharded, the last block kept — which the plan cannot say).
    The Korthikanti mapping gave 133.7–140.5 GiB."""
    est = estimate(titan(runtime__loss_impl="eager", runtime__zero_grad="set_to_none")).heaviest
    assert est.peak_moments[est.peak_phase] == "backward.start"
    low, high = est.peak
    assert (low, high) == (71_275_573_923 + WORKSPACES, 73_610_291_302 + WORKSPACES)
    assert 66 * GiB < low < high < 69 * GiB
    saved = rows_of(titan(runtime__loss_impl="eager"))["hbm.activations.saved.layers"]
    assert saved.low == int(33_353_105_408 * 0.98)
