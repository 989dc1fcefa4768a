"""``memplan trace`` of a ``deepspeed`` plan: DeepSpeed's own ZeRO engine on real CPU tensors.

The refusals and the ds_config need no torch. The CI slice traces the grid's smallest
shape (``engine/trace/deepspeed/grid.py``: Llama-shaped, hidden 512, 2 layers, vocab
8192, s 512, world 8, bf16, knobs that bite at this width) at ZeRO 1, 2 and 3 (about
10 s each) and checks it against hand-derived bytes and the ledger. Skipped when
DeepSpeed is not installed; ``bootstrap.sh`` installs it (the ``trace`` extra).
"""

from __future__ import annotations

import functools
import importlib.util

import pytest

from engine.estimate import estimate
from engine.plan import default_plan, with_values
from engine.trace.compare import compare
from engine.trace.deepspeed.config import ds_config
from engine.trace.deepspeed.grid import grid_plan
from engine.trace.deepspeed.support import (
    FIX,
    MISSING,
    deepspeed_refusal,
    tensor_bytes,
    uses_deepspeed,
)
from engine.trace.result import TraceResult
from tests.trace.needs_extra import needs_trace_extra

HAS_DEEPSPEED = importlib.util.find_spec("deepspeed") is not None

N_PARAMS = 14_289_408
"""The grid shape h512-L2-v8k: embedding and head 2 × 8192·512 = 8,388,608; per layer
q, o 2 × 512·512 + k, v 2 × 512·256 + gate, up, down 3 × 512·1408 + 2 norms × 512 =
2,950,144 (× 2 layers = 5,900,288); final norm 512 → 14,289,408."""


def test_big_plans_are_refused_with_the_limit_and_the_fix() -> None:
    """Llama-3.1-8B cannot be materialised on this machine: one sentence, the plan's
    bytes, the limit and the fix. N = 8,030,261,248 parameters, dp 8, s 4096, vocab
    128,256: 4 N + 16 N / 8 + 14 · 4096 · 128,256 = 32,121,044,992 + 16,060,522,496 +
    7,354,712,064 = 55,536,279,552 B."""
    plan = with_values(default_plan(), {"stack.name": "deepspeed", "parallelism.strategy": "zero3"})
    assert tensor_bytes(plan) == 55_536_279_552
    reason = deepspeed_refusal(plan)
    assert reason is not None
    assert "about 55,536,279,552 B of tensors here, at most 1,200,000,000 B" in reason
    assert reason.endswith(FIX)


def test_the_grid_fits_the_limit() -> None:
    """The grid's largest shape, h1024-L4-v32k: N = embedding and head 2 · 32,000 · 1024
    = 65,536,000 + 4 layers × (q, o 2 · 1024² + k, v 2 · 1024 · 512 + gate, up, down
    3 · 1024 · 2816 + 2 norms · 1024 = 11,798,528) + final norm 1024 = 112,731,136; at dp 8
    4 N + 16 N / 8 = 676,386,816, logits 14 · 512 · 32,000 = 229,376,000 → 905,762,816 B,
    under 1.2 GB (that run peaked at 1.33 GB RSS with the libraries)."""
    assert tensor_bytes(grid_plan("h1024-L4-v32k", 1)) == 905_762_816


def test_buckets_of_the_code_default_are_refused() -> None:
    """reduce_bucket_size 5e8 (DeepSpeed's default) would allocate 1 GB of bf16 here."""
    plan = with_values(
        grid_plan("h512-L2-v8k", 2), {"parallelism.knobs.ds_reduce_bucket_elements": 500_000_000}
    )
    reason = deepspeed_refusal(plan)
    assert reason is not None and "500,000,000" in reason


def test_other_stacks_do_not_dispatch_here() -> None:
    assert uses_deepspeed(grid_plan("h512-L2-v8k", 1))
    assert not uses_deepspeed(default_plan())  # FSDP2 under pytorch


def test_grid_plan_is_accepted_when_deepspeed_is_installed() -> None:
    reason = deepspeed_refusal(grid_plan("h512-L2-v8k", 3))
    assert reason == (None if HAS_DEEPSPEED else MISSING)


def test_ds_config_carries_the_plan_knobs() -> None:
    """Each knob the ledger reads is what DeepSpeed is given (grid.py KNOBS); overlap_comm
    resolves to the stage default (True for ZeRO-3, False below: deepspeed
    runtime/zero/config.py)."""
    z3 = ds_config(grid_plan("h512-L2-v8k", 3))["zero_optimization"]
    assert z3["stage"] == 3 and z3["overlap_comm"] is True
    assert z3["reduce_bucket_size"] == 1_000_000
    assert z3["stage3_prefetch_bucket_size"] == 200_000
    assert z3["stage3_param_persistence_threshold"] == 10_000
    assert z3["stage3_max_live_parameters"] == 1_000_000
    z1 = ds_config(grid_plan("h512-L2-v8k", 1))["zero_optimization"]
    assert z1["stage"] == 1 and z1["overlap_comm"] is False
    assert "stage3_prefetch_bucket_size" not in z1


@functools.cache
def _traced(stage: int) -> TraceResult:
    from engine.trace.runner import trace_plan

    return trace_plan(grid_plan("h512-L2-v8k", stage))


needs_deepspeed = pytest.mark.skipif(not HAS_DEEPSPEED, reason="DeepSpeed is not installed")


@needs_trace_extra
@needs_deepspeed
@pytest.mark.parametrize("stage", [1, 2])
def test_zero12_model_states_by_hand(stage: int) -> None:
    """ZeRO-1/2 on rank 0 of 8 (deepspeed runtime/zero/stage_1_and_2.py):

    - params: one flat bf16 group, N × 2 = 28,578,816 B (a multiple of 512 and of 8 ranks:
      no padding);
    - optimizer state: fp32 master partition N/8 = 1,786,176 el. × 4 = 7,144,704 →
      7,144,960 B rounded to 512, and AdamW's exp_avg and exp_avg_sq alike, plus the fused
      step tensor 512 B: 3 × 7,144,960 + 512 = 21,435,392 B;
    - gradients after backward: ``copy_grads_in_partition`` sizes ``grads_in_partition``
      by the whole parameters that overlap this rank's partition (``params_in_partition``),
      not by the partition: rank 0's 1,786,176 elements lie inside the embedding, so the
      buffer is the whole embedding, 8192 · 512 × 2 = 8,388,608 B — the ledger's
      ``hbm.grads`` counts the partition, 1,786,176 × 2 → 3,572,736 B.
    """
    states = _traced(stage).model_states
    assert states["params"] == N_PARAMS * 2 == 28_578_816
    assert states["optimizer_state"] == 3 * 7_144_960 + 512
    assert states["grads"] == 8192 * 512 * 2


@needs_trace_extra
@needs_deepspeed
@pytest.mark.parametrize("stage", [1, 2, 3])
def test_traced_peak_inside_the_ledger_range(stage: int) -> None:
    """The traced peak lies inside the ledger's allocated range (printed with -s). At
    ZeRO-1/2 the loss's backward is the peak and the IPG bucket is not yet allocated there
    (stage_1_and_2.py ``process_gradients`` -> ``setup_buckets``)."""
    result = _traced(stage)
    line = compare(result, estimate(grid_plan("h512-L2-v8k", stage))).peak
    print(f"ZeRO-{stage}: traced {line.traced:,} B, ledger {line.low:,}-{line.high:,} B")
    assert line.inside


@needs_trace_extra
@needs_deepspeed
def test_zero3_rows_at_the_peak_match_the_ledger_exactly() -> None:
    """ZeRO-3 at the backward peak (the loss's backward), rank 0 of 8, against the rows
    the ledger builds from the same knobs (deepspeed runtime/zero/stage3.py):

    - gathered: only the head, 8192 · 512 × 2 = 8,388,608 B (``hbm.gathered.reused.root``:
      it is reused at once by backward; every decoder layer was released after its forward);
    - gradients: the flat partition ``grad_partitions_flat_buffer``, N / 8 × 2 → 3,572,736 B;
    - buckets: one ``reduce_bucket_size`` 1e6 × 2 B → 2,000,384 B, allocated at init;
    - optimizer: fp32 master + exp_avg + exp_avg_sq, 3 × 7,144,960, + step 512 B.
    """
    cmp = compare(_traced(3), estimate(grid_plan("h512-L2-v8k", 3)))
    lines = {line.name: line for line in cmp.groups}
    expected = {
        "gathered": 8192 * 512 * 2,
        "gradients": 3_572_736,
        "buckets": 2_000_384,
        "optimizer": 3 * 7_144_960 + 512,
    }
    for name, value in expected.items():
        line = lines[name]
        assert (line.traced, line.low, line.high) == (value, value, value), name


def test_process_wide_rebindings_are_put_back() -> None:
    """ZeRO-3 rebinds ``torch.nn.functional.linear`` to its ``zero3_linear_wrap`` and never
    restores it; a later trace in the same process (the test session, a reused trace
    worker) then saved different tensors for backward (four HF grid cases read 7-9 %
    below the ledger). The trace's environment puts the binding back."""
    pytest.importorskip("deepspeed")
    import torch

    from engine.trace.deepspeed.environment import deepspeed_environment

    original = torch.nn.functional.linear
    with deepspeed_environment(8, 0):
        torch.nn.functional.linear = lambda *a, **k: None  # as zero.Init does
    assert torch.nn.functional.linear is original
