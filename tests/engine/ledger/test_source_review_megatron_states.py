"""Megatron-Core's fp32 main-grad shard for the optimizer (issue 35 item 9), derived by
hand from Megatron-LM's ``megatron/core/optimizer/distrib_optimizer.py``.

Llama-3.1-8B (the default plan) under ``megatron_distopt`` on DP 8 with bf16 main grads
(``--grad-reduce-in-bf16``): P = 8,030,261,248, the rank's shard P / 8 = 1,003,782,656
elements.
"""

from __future__ import annotations

from ledger_plans import make_plan

from engine.estimate import estimate
from engine.exports.megatron import megatron_args
from engine.ledger.row import Row
from engine.stacks.defaults import resolved

SHARD = 8_030_261_248 // 8


def _rows(**changes: object) -> dict[str, Row]:
    plan = make_plan(
        parallelism__strategy="megatron_distopt", method__precision__grad_dtype="bf16", **changes
    )
    return {r.id: r for r in estimate(plan).rows}


def test_fp32_grad_shard_lives_from_the_step_to_the_next_zero_grad() -> None:
    """``_copy_model_grads_to_main_grads`` sets ``shard_main_param.grad =
    shard_model_grad.float()`` inside ``step``: 4 B × 1,003,782,656 = 4,015,130,624 B;
    ``zero_grad(set_to_none=True)`` at the start of the next ``train_step`` drops it, so
    it is live at the step and at a checkpoint saved after it — not in forward or
    backward, where the review found it counted."""
    row = _rows()["hbm.optimizer.fp32_grad_shard"]
    assert row.low == row.high == 4 * SHARD == 4_015_130_624
    assert row.moments == frozenset({"optimizer", "checkpoint"})
    assert row.kind == "peak"


def test_precision_aware_optimizer_makes_no_fp32_copy() -> None:
    """With ``--use-precision-aware-optimizer`` the same function sets
    ``shard_main_param.decoupled_grad = shard_model_grad`` (the bf16 view itself) and
    ``zero_grad`` skips ``shard_fp32_from_float16_groups``: no fp32 shard. Megatron's
    default is off (``arguments.py``), and so is the plan's."""
    assert not resolved(make_plan()).method.optimizer.precision_aware
    assert "hbm.optimizer.fp32_grad_shard" not in _rows(method__optimizer__precision_aware=True)


def test_fp32_main_grads_need_no_copy() -> None:
    """The stack default (``--bf16`` keeps fp32 main grads): ``.float()`` of an fp32 view
    is the view itself, so there is no copy to count."""
    plan = make_plan(parallelism__strategy="megatron_distopt")
    assert resolved(plan).method.precision.grad_dtype == "fp32"
    assert "hbm.optimizer.fp32_grad_shard" not in {r.id for r in estimate(plan).rows}


def test_export_names_the_grad_buffer_dtype_and_the_optimizer() -> None:
    """bf16 grads without the knob export as a bf16 grad buffer (``--grad-reduce-in-bf16``,
    copied to fp32 for the step); with it, as ``--main-grads-dtype bf16`` under
    ``--use-precision-aware-optimizer``."""
    plain = make_plan(
        parallelism__strategy="megatron_distopt", method__precision__grad_dtype="bf16"
    )
    args, _ = megatron_args(resolved(plain))
    assert args.get("--grad-reduce-in-bf16") and "--use-precision-aware-optimizer" not in args
    aware = make_plan(
        parallelism__strategy="megatron_distopt",
        method__precision__grad_dtype="bf16",
        method__optimizer__precision_aware=True,
    )
    args, _ = megatron_args(resolved(aware))
    assert args["--main-grads-dtype"] == "bf16" and args["--use-precision-aware-optimizer"]
