"""The batch a layout runs with: micro-batch and accumulation for its DP replicas and its
pipeline, and why a batch cannot be formed."""

from __future__ import annotations

from engine.errors import Problem
from engine.legality import rules
from engine.plan import Plan


def target_global_batch(plan: Plan) -> int:
    """The global batch the plan asks for: explicit, or micro × accumulation × replicas."""
    b, par = plan.batch, plan.parallelism
    if b.global_batch is not None:
        return b.global_batch
    return b.micro_batch * b.grad_accum * par.dp


def keeps_global_batch(plan: Plan) -> bool:
    """True when a new layout must keep the plan's global batch: the plan holds it, or
    the user set it. A global batch typed in is a training hyperparameter (the learning
    rate and schedule were tuned for it), so a layout raises grad_accum to keep it rather
    than letting it follow DP — whatever ``hold_fixed`` says about the micro-batch."""
    b = plan.batch
    return b.hold_fixed == "global_batch" or b.global_batch is not None


def held_batch(plan: Plan) -> int | None:
    """The global batch every layout must keep, or None when only the micro-batch is
    held (no global batch set: it then follows DP, and every layout row shows it)."""
    return target_global_batch(plan) if keeps_global_batch(plan) else None


def batch_for(plan: Plan, dp: int, pp: int = 1) -> tuple[int, int] | Problem:
    """(micro-batch, accumulation) for DP replicas and PP stages, or why the batch is
    unreachable.

    With ``hold_fixed = global_batch`` the global batch stays and accumulation absorbs
    the change (a pipeline that then gets fewer than p micro-batches is judged by the
    ``pipeline_full`` preference). With ``micro_batch`` the micro-batch stays and
    accumulation is the plan's, raised to p for a pipeline of p stages — the schedule's
    minimum m ≥ p, without which 1F1B idles and holds fewer micro-batches than any
    efficient run; the global batch follows.
    """
    b = plan.batch
    held = held_batch(plan)
    if held is None:
        return b.micro_batch, max(b.grad_accum, pp) if pp > 1 else b.grad_accum
    unreachable = rules.global_batch_reachable(held, b.micro_batch, dp)
    if unreachable:
        return unreachable
    return b.micro_batch, held // (b.micro_batch * dp)


def accumulation_words(plan: Plan, pp: int, grad_accum: int) -> str:
    """Why a layout runs ``grad_accum`` micro-batches per step, for a count's reason."""
    held = held_batch(plan)
    if held is not None:
        return f"grad_accum {grad_accum} reaches the held global batch {held:,}"
    if pp > 1 and grad_accum > plan.batch.grad_accum:
        return f"grad_accum {grad_accum} = the pipeline schedule's minimum m ≥ p = {pp}"
    return f"grad_accum {grad_accum} as the plan sets it"


def step_words(global_batch: int, seq_len: int) -> str:
    """A layout's global batch and tokens per step, as every layout row shows them."""
    return f"{global_batch:,} seq × {seq_len:,} = {global_batch * seq_len:,} tokens/step"


def batch_change(plan: Plan, global_batch: int) -> str:
    """What running a layout of ``global_batch`` sequences does to the plan's step, in
    words ("" when it keeps it): a layout whose DP differs moves the global batch when
    only the micro-batch is held, and a reader must see that before applying it."""
    now = target_global_batch(plan)
    if global_batch == now:
        return ""
    s = plan.batch.seq_len
    return (
        f"changes the global batch {now:,} → {global_batch:,} "
        f"({now * s:,} → {global_batch * s:,} tokens/step): set batch.global_batch to keep it"
    )
