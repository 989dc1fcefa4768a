"""torchtune's own 3B LoRA step traced (``tune_lora_step.py``) against the ledger.

The case ``torchtune-3b-lora-packed`` (README "Optimization flags" table, LoRA row:
8.5 GiB, pinned at 8.492-8.499 by its %-change column) is 0.16 GiB under what two source
readings found torchtune holds at the loss. The trace runs torchtune's code
(``lora_llama3_2_3b``, ``set_activation_checkpointing``, ``OffloadActivations``,
``CEWithChunkedOutputLoss``, fused AdamW) and pins what it holds, hand-derived:

- frozen base: 3,212,749,824 params x 2 B (Llama 3.2 3B, tied embedding counted once)
  = 6,425,499,648 B;
- adapters (rank 64 on q, v, output_proj and the MLP's three linears, 28 layers) bf16
  89,915,392 params = 179,830,784 B; AdamW's exp_avg + exp_avg_sq the same twice and a
  512 B ``step`` per adapter tensor (fused: on the device), 28 x 12 = 336 tensors;
- the chunk logits, every one kept by the compiled ``compute_cross_entropy``: 8 x
  (2 x 512 x 128,256 x 2 B) = 2,101,346,304 B;
- OffloadActivations' ``fwd_stash`` after the forward: the final RMSNorm's fp32 ``x``
  (2 x 4096 x 3072 x 4 = 100,663,296) and its rsqrt (2 x 4096 x 4 = 32,768) — the
  ``mul`` by the frozen scale saves only the scale, a Parameter the pack skips — and the
  last layer's checkpointed input (2 x 4096 x 3072 x 2 = 50,331,648);
- the RoPE cache fp32 131,072 x 64 x 2 = 67,108,864 B, tokens / positions / labels.

The first chunk's backward adds its bf16 gradient (262,668,288 B): the trace's peak.
The ledger's allocated range for the case is that peak at both ends (plus its cuBLAS
workspaces, which a CPU trace has none of), so the published figure's gap is not a
ledger term the trace finds: the measured run held less than this code allocates.
"""

from __future__ import annotations

import functools

import pytest

from engine.estimate import estimate
from engine.validation.published import case_plan, load_cases
from tests.trace.tune_live import LiveBytes

pytest.importorskip("torchtune", reason="torchtune (not in the trace extra) is not installed")
pytest.importorskip("torchao", reason="torchtune imports torchao; not installed")

_FROZEN = 3_212_749_824 * 2
_ADAPTERS = 89_915_392 * 2
_MOMENTS = 2 * _ADAPTERS + 336 * 512
_LOGITS = 8 * (2 * 512 * 128_256 * 2)
_STASH = 2 * 4096 * 3072 * 4 + 2 * 4096 * 4 + 2 * 4096 * 3072 * 2
_ROPE = 131_072 * 64 * 2 * 4
_CHUNK_GRAD = 2 * 512 * 128_256 * 2
_CUBLAS = 17_039_360  # the ledger's hbm.runtime.cublas: not in a CPU trace


@functools.cache
def _traced(*argv: str) -> LiveBytes:
    """One trace of the case's step (about 30 s on one core)."""
    from tests.trace.tune_lora_step import main_args, run

    return run(main_args(list(argv)))


def test_the_loss_moment_is_the_hand_derived_sum() -> None:
    live = _traced()
    at_loss = live.marks["step2.backward"]
    floor = _FROZEN + _ADAPTERS + _MOMENTS + _LOGITS + _STASH + _ROPE
    # what is left: the batch (3 x 2 x 4096 int64), the loss's labels and scalars, theta
    assert 0 <= at_loss - floor < 400_000, (at_loss, floor)


def test_the_peak_is_the_first_chunks_backward() -> None:
    live = _traced()
    # plus the backward's seed and the DivBackward scalars (512 B blocks)
    assert 0 <= live.peak - live.marks["step2.backward"] - _CHUNK_GRAD <= 2048
    assert "CompiledChunkCEBackward" in live.peak_at


def test_the_ledger_holds_the_traced_moments() -> None:
    live = _traced()
    case = next(c for c in load_cases() if c.id == "torchtune-3b-lora-packed")
    peak = estimate(case_plan(case)).peak
    # both ends: the chunk's gradient is out of place (test_compiled_ce_donation.py)
    assert abs(peak.low - (live.peak + _CUBLAS)) < 1 << 20
    assert abs(peak.high - (live.peak + _CUBLAS)) < 1 << 20
    assert peak.low > int(8.499 * (1 << 30))  # the published figure is under both


# QLoRA (3B_qlora_single_device: the same adapters over torchao NF4 bases): the ledger's
# three frozen rows (hbm.weights.nf4, nf4_constants, frozen: the embedding and the
# 28 x 2 + 1 RMSNorm scales in bf16)
_QLORA_FROZEN = 1_409_286_144 + 44_613_632 + (128_256 * 3072 + 57 * 3072) * 2


def test_qlora_without_streams_drops_the_base_and_the_stash() -> None:
    """``OffloadActivations(use_streams=False)`` keeps no ``fwd_stash``: every packed
    tensor goes to the host at once, so nothing of the forward's tail stays at the loss.
    The one traced variant that lands inside a pinned figure (QLoRA 4.610-4.615 GiB):
    not a plan change, as the stream default of the run's code is True."""
    live = _traced("--qlora", "--streams", "off")
    at_loss = live.marks["step2.backward"]
    floor = _QLORA_FROZEN + _ADAPTERS + _MOMENTS + _LOGITS + _ROPE
    assert 0 <= at_loss - floor < 400_000, (at_loss, floor)
    assert int(4.610 * (1 << 30)) < at_loss < int(4.615 * (1 << 30))
