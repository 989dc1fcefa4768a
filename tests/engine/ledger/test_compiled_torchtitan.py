"""torch.compile on torchtitan's profile (engine/ledger/activations/compiled.py),
hand-derived for Llama-3.1-8B (h 4096, I 14,336, 32 blocks) at T = 2 × 8192 = 16,384
tokens, bf16 compute (2 B), FSDP2 over 8 ranks (the Dec-2024 benchmark's shape).

torchtitan compiles each ``TransformerBlock`` after wrapping it for AC
(``parallelize_llama.py`` ``apply_ac`` then ``apply_compile``). Under per-op SAC the save
list's ``MUST_SAVE`` tags keep the partitioner from recomputing a listed op's output but
do not make the compiled graph keep what its backward never reads; eager SAC's cache
(torch/utils/checkpoint.py ``_CachingTorchDispatchMode``) keeps every listed output for
the replay. w2's output (mm 7, cached) is read by no backward node:
  4096 × 2 B × 16,384 tokens = 134,217,728 B a block, × 32 = 4,294,967,296 B
off the low end of the saved layers. With no AC each block keeps its saved set and the
SwiGLU pair silu(w1) and the product is recomputed (its norms are the fused kernel in the
profile already): 2 × 14,336 × 2 B × 16,384 = 939,524,096 B a block.
"""

from __future__ import annotations

from test_torchtitan_profile import SAC_PER_TOKEN, T, rows_of, titan

from engine.ledger.row import Row

SAC_LAYERS = 32 * SAC_PER_TOKEN * T  # 33,353,105,408 B (test_torchtitan_profile.py)
W2_OUT = 4096 * 2 * T


def _saved(**changes: object) -> Row:
    return rows_of(titan(**changes))["hbm.activations.saved.layers"]


def test_sac_compile_drops_w2_output_from_the_low_end() -> None:
    assert SAC_LAYERS == 33_353_105_408 and W2_OUT == 134_217_728
    eager = _saved(runtime__loss_impl="eager")
    comp = _saved(runtime__loss_impl="eager", workload__torch_compile=True)
    assert eager.low == int(SAC_LAYERS * 0.98)
    assert comp.low == int((SAC_LAYERS - 32 * W2_OUT) * 0.98) == 28_476_975_349
    assert comp.high == eager.high
    assert "4,294,967,296" in comp.formula


def test_no_ac_compile_drops_the_swiglu_pair_only() -> None:
    pair = 2 * 14_336 * 2 * T
    assert pair == 939_524_096
    eager = _saved(method__recompute__policy="none")
    comp = _saved(method__recompute__policy="none", workload__torch_compile=True)
    one = -(-eager.low * 100 // 98)
    assert int(one * 0.98) == eager.low
    assert comp.low == int((one - 32 * pair) * 0.98)


def test_full_ac_compile_keeps_block_inputs_and_lowers_the_recomputed_block() -> None:
    """FullAC keeps each block's input (nothing cached to drop); the block recomputed in
    backward keeps its compiled set: the working set's low end loses one SwiGLU pair."""
    eager = rows_of(titan(method__recompute__policy="full"))
    comp = rows_of(titan(method__recompute__policy="full", workload__torch_compile=True))
    saved = "hbm.activations.saved.layers"
    assert (comp[saved].low, comp[saved].high) == (eager[saved].low, eager[saved].high)
    w_e, w_c = eager["hbm.activations.working.layer"], comp["hbm.activations.working.layer"]
    net = -(-w_e.low * 100 // 98)
    assert w_c.low == int((net - 939_524_096) * 0.98)
    assert w_c.high == w_e.high
