"""A global batch the user set is a hyperparameter: every layout the search offers keeps
it (grad_accum absorbs DP), the micro-batch lever keeps it, and a layout that moves an
unset global batch says so; the validation range has one ascending spelling."""

from __future__ import annotations

import dataclasses

from engine.layout.counts import ascending, gpu_counts, validation_range
from engine.layout.levers import fit_levers
from engine.layout.point import batch_change, held_batch, step_words
from engine.layout.shapes import Layout, with_layout
from engine.plan import Plan, default_plan, with_values


def _set_32() -> Plan:
    """The default plan (Llama-3.1-8B, DP 8, micro-batch 1, sequence 4,096) with the
    global batch typed in as 32: grad_accum 4 = 32 / (1 × 8) makes it consistent
    (engine/legality/rules.py global_batch_matches). hold_fixed stays micro_batch."""
    return with_values(default_plan(), {"batch.global_batch": 32, "batch.grad_accum": 4})


def test_a_set_global_batch_is_held_whatever_hold_fixed_says() -> None:
    plan = _set_32()
    assert plan.batch.hold_fixed == "micro_batch"
    assert held_batch(plan) == 32
    assert held_batch(default_plan()) is None  # nothing set: the micro-batch is held


def test_with_layout_keeps_the_set_global_batch() -> None:
    """DP 8 → DP 4 at micro-batch 1: grad_accum 8 keeps 1 × 8 × 4 = 32 sequences; the
    field stays 32 (it used to go back to auto and the step to 32,768 tokens)."""
    got = with_layout(_set_32(), Layout(2, 1, 1, 1, 4, 1, 8))
    assert got.batch.global_batch == 32 and got.batch.grad_accum == 8


def test_every_offered_layout_keeps_the_set_global_batch() -> None:
    """The counts and each ranked alternative run 32 sequences × 4,096 = 131,072 tokens."""
    k = gpu_counts(_set_32(), 64)
    layouts = [k.first_layout.layout, k.arithmetic_min.layout, *(o.layout for o in k.alternatives)]
    assert k.alternatives, "the default plan has alternatives at 8 GPUs"
    assert all(lay is not None and lay.global_batch == 32 for lay in layouts)
    assert k.plan_batch == 32 and k.seq_len == 4096
    assert "131,072 tokens/step" in (k.first_layout.reason)


def test_the_micro_batch_lever_keeps_the_global_batch() -> None:
    """Micro-batch 2, grad_accum 2, DP 8: 2 × 2 × 8 = 32 sequences. The lever (micro-batch
    1) promises the same global batch: it sets 32 and the layout it buys runs 32 (it
    gave 24 when DP followed the search)."""
    plan = with_values(default_plan(), {"batch.micro_batch": 2, "batch.grad_accum": 2})
    lever = next(lv for lv in fit_levers(plan, 64) if lv.name == "micro-batch 1")
    assert dict(lever.changes)["batch.global_batch"] == 32
    assert "(32)" in lever.cost
    assert lever.counts is not None and lever.counts.first_layout.layout is not None
    assert lever.counts.first_layout.layout.global_batch == 32


def test_a_layout_that_moves_an_unset_global_batch_says_so() -> None:
    """Default: 1 × 1 × 8 = 8 sequences × 4,096 = 32,768 tokens; at DP 4: 4 × 4,096 =
    16,384."""
    plan = default_plan()
    assert batch_change(plan, 8) == ""
    words = batch_change(plan, 4)
    assert "8 → 4" in words and "32,768 → 16,384 tokens/step" in words
    assert step_words(32, 4096) == "32 seq × 4,096 = 131,072 tokens/step"


def test_the_validation_range_reads_ascending() -> None:
    """The backwards "4–2 (4 by node)": the low estimate fit a 4-rank layout, the high one
    a 2-rank layout, both on one 4-GPU node. One spelling: the GPUs to buy once, and the
    ranks as their own ascending range."""
    assert ascending(4, 2) == "2–4" and ascending(4, 8) == "4–8" and ascending(8, 8) == "8"
    assert ascending(8, None) == "at least 8"
    k = gpu_counts(default_plan(), 64)
    lo = dataclasses.replace(k.validation_low, gpus=4, layout=Layout(1, 1, 1, 1, 4))
    hi = dataclasses.replace(k.validation_high, gpus=4, layout=Layout(2, 1, 1, 1, 1))
    odd = dataclasses.replace(k, validation_low=lo, validation_high=hi, straddles=False)
    assert validation_range(odd) == "4 GPUs (layouts of 2–4 ranks)"
    # the default plan: the low estimate fits 2 ranks (CP2), the high one needs 4, each a
    # partial-node purchase of its own size (engine/layout/point.py): a straddling range
    assert validation_range(k) == "2–4 GPUs (straddles)"
