"""The ds_config a ``deepspeed`` plan stands for, as ``deepspeed.initialize`` takes it.

Every ZeRO knob the ledger reads is written out (``parallelism.knobs``), so the trace runs
the sizes the rows assume: ``reduce_bucket_size`` and ``allgather_bucket_size``,
``overlap_comm`` (resolved: the stage's default), and for ZeRO-3 the prefetch bucket,
persistence threshold, live-parameter and reuse-distance limits. ``contiguous_gradients``
stays at its default (True), as the ledger's rows assume.
"""

from __future__ import annotations

from typing import Any

from engine.plan import Plan
from engine.stacks.defaults import resolved
from engine.trace.deepspeed.support import STAGES


def ds_config(plan: Plan) -> dict[str, Any]:
    """The ds_config dict of an accepted plan (fields left to the stack resolved first:
    ``overlap_comm`` ``None`` is the stage's default)."""
    plan = resolved(plan)
    k = plan.parallelism.knobs
    stage = STAGES[plan.parallelism.strategy]
    zero: dict[str, Any] = {
        "stage": stage,
        "reduce_bucket_size": k.ds_reduce_bucket_elements,
        "allgather_bucket_size": k.ds_allgather_bucket_elements,
        "overlap_comm": bool(k.ds_overlap_comm),
        "contiguous_gradients": True,
    }
    if stage == 3:
        zero.update(
            {
                "stage3_prefetch_bucket_size": k.ds_prefetch_bucket_elements,
                "stage3_param_persistence_threshold": k.ds_param_persistence_threshold,
                "stage3_max_live_parameters": k.ds_max_live_parameters,
                "stage3_max_reuse_distance": k.ds_max_reuse_distance,
            }
        )
    return {
        "train_micro_batch_size_per_gpu": plan.batch.micro_batch,
        "gradient_accumulation_steps": plan.batch.grad_accum,
        "bf16": {"enabled": True},
        "zero_optimization": zero,
        "zero_allow_untested_optimizer": True,
        "steps_per_print": 2**31 - 1,
        "wall_clock_breakdown": False,
    }
