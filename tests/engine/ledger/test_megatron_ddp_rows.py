"""Megatron-Core's own DDP (strategy ``ddp`` under ``stack.name`` megatron_core) and its
loss backward, derived by hand from Megatron-Core 0.16.1 (issue 37's trace findings).

Llama-3.1-8B (the default plan's model), N = 8,030,261,248 parameters, DP 8, bf16 with
fp32 main grads (the stack's ``--bf16``), s 4096, micro-batch 1.

- ``megatron/core/distributed/param_and_grad_buffer.py``: ``_ParamAndGradBuffer.__init__``
  allocates ``grad_data`` (``torch.zeros(numel, dtype=grad_dtype)``) when
  ``DistributedDataParallel`` wraps the model; every ``param.main_grad`` is a view of it,
  and ``_ParamAndGradBucketGroup.start_grad_sync`` all-reduces each bucket's
  ``grad_data`` view in place — no torch ``Reducer`` buckets (torch DDP's flat copy of
  every gradient) and no per-tensor ``.grad`` appearing during backward.
- ``megatron/core/optimizer/optimizer.py`` ``Float16OptimizerWithFloat16Params.
  _copy_model_grads_to_main_grads``: ``main_param.grad = model_param.main_grad.float()``,
  the fp32 view itself (no copy), so the step holds what stays between steps.
- ``megatron/core/tensor_parallel/layers.py``
  ``LinearWithGradAccumulationAndAsyncCommunication.backward``: the output layer's
  ``grad_input = grad_output.matmul(weight)``, T × h bf16, made while the logits'
  gradient (its 16-bit cast) is live.
"""

from __future__ import annotations

from ledger_plans import make_plan

from engine.estimate import Estimate, estimate
from engine.ledger.row import Row
from engine.plan import Plan
from engine.stacks.families import MEGATRON_DDP, STRATEGIES, stack_rule_of

N_8B = 8_030_261_248
LOGITS = 4096 * 128_256 * 2  # the bf16 logits' gradient cast, 1,050,673,152 B
DGRAD = 4096 * 4096 * 2  # the head's bf16 input gradient, 33,554,432 B


def _plan(stack: str, strategy: str = "ddp") -> Plan:
    return make_plan(
        stack__name=stack,
        parallelism__strategy=strategy,
        parallelism__dp=8,
        batch__seq_len=4096,
        batch__micro_batch=1,
    )


def _rows(est: Estimate) -> dict[str, Row]:
    return {r.id: r for r in est.heaviest.rows}


def test_megatron_ddp_is_its_own_rule_only_under_megatron_core() -> None:
    assert stack_rule_of("ddp", "megatron_core") is MEGATRON_DDP
    assert stack_rule_of("ddp", "pytorch") is STRATEGIES["ddp"]
    assert stack_rule_of("megatron_distopt", "megatron_core") is STRATEGIES["megatron_distopt"]
    assert MEGATRON_DDP.shards_nothing and MEGATRON_DDP.family == "megatron"


def test_megatron_ddp_keeps_its_grad_buffer_and_has_no_torch_ddp_rows() -> None:
    """The fp32 grad buffer, 4 B × 8,030,261,248 = 32,121,044,992 B, is live at every
    moment (allocated at wrap time); torch DDP's bucket copy and the per-tensor
    gradients made before the first layer's backward do not exist."""
    rows = _rows(estimate(_plan("megatron_core")))
    grads = rows["hbm.grads"]
    assert grads.low == grads.high == 4 * N_8B == 32_121_044_992
    assert {"forward", "backward.start", "backward.end", "optimizer"} <= grads.moments
    for gone in ("hbm.buckets.ddp", "hbm.grads.before_first_layer", "hbm.grads.last_layer"):
        assert gone not in rows


def test_torch_ddp_keeps_its_reducer_buckets() -> None:
    """The same plan under the pytorch stack is torch DDP: the Reducer's buckets (a flat
    copy of every gradient, bf16 there: 2 B × N at the least) stay."""
    rows = _rows(estimate(_plan("pytorch")))
    assert rows["hbm.buckets.ddp"].low >= 2 * N_8B


def test_megatron_ddp_step_holds_only_the_states() -> None:
    """The optimizer moment holds the states kept between steps and nothing more: bf16
    params 2N + fp32 grad buffer 4N + fp32 main params 4N + Adam's two fp32 moments 8N
    (+ step counters), i.e. the steady moment (traced: optimizer step 26.77 GB = steady
    at 2 layers, where torch-DDP pricing gave 32.71 GB)."""
    est = estimate(_plan("megatron_core"))
    step = est.heaviest.moments["optimizer"]
    steady = est.heaviest.moments["steady"]
    assert step == steady
    states = sum(
        r.high
        for r in est.heaviest.rows
        if r.location == "hbm"
        and r.kind == "persistent"
        and r.group in ("weights", "gradients", "optimizer")
    )
    assert states - (2 + 4 + 4 + 8) * N_8B < 1_000_000  # the step counters


def test_megatron_loss_backward_counts_the_heads_input_gradient() -> None:
    """The 16-bit cast of the logits' gradient, 4096 · 128,256 · 2 = 1,050,673,152 B,
    plus the output layer's input gradient 4096 · 4096 · 2 = 33,554,432 B."""
    rows = _rows(estimate(_plan("megatron_core", "megatron_distopt")))
    assert rows["hbm.loss.backward_transient"].high == LOGITS + DGRAD == 1_084_227_584


def test_megatron_batch_holds_position_ids_and_the_loss_mask() -> None:
    """Megatron-LM ``megatron/training/utils.py`` ``get_batch_on_this_tp_rank`` moves
    ``tokens``, ``labels``, ``position_ids`` (int64) and ``loss_mask`` (fp32) to the GPU:
    s 4096, b 1 → 3 × 4096 · 8 + 4096 · 4 = 114,688 B (the HF batch's input_ids and
    labels would be 65,536 B)."""
    rows = _rows(estimate(_plan("megatron_core", "megatron_distopt")))
    assert rows["hbm.inputs.batch"].low == rows["hbm.inputs.batch"].high == 114_688
    assert _rows(estimate(_plan("pytorch")))["hbm.inputs.batch"].high == 65_536
