"""Fit levers: the summary the window and the report print is the lever's own search,
and a lever the stack cannot run says why instead of "nothing fits"."""

from __future__ import annotations

import pickle

import engine.analysis as an
from engine.cli.layout_json import levers_json
from engine.cli.text import render_levers
from engine.layout.counts import gpu_counts
from engine.layout.levers import LeverSummary, fit_levers
from engine.plan import default_plan, with_value, with_values


def test_a_summary_is_its_levers_procurement_and_minimum() -> None:
    """For each lever of the default plan (up to 64 GPUs): the summary's GPUs, layout,
    nodes, arithmetic minimum and reason are the lever's counts', and it pickles small
    (the window's worker sends it to the GUI thread)."""
    plan = with_value(default_plan(), "policy.max_gpus", 64)
    levers = fit_levers(plan)
    assert [lv.name for lv in levers] == [
        "full activation recompute",
        "offload to host RAM",
        "LoRA",
        "QLoRA",
    ]
    for lv in levers:
        s = LeverSummary.of(lv)
        assert lv.counts is not None and s.error is None
        first = lv.counts.first_layout
        assert (s.gpus, s.layout, s.reason) == (first.gpus, first.layout, first.reason)
        assert s.arithmetic_min == lv.counts.arithmetic_min.gpus
        assert s.nodes == lv.counts.nodes
        assert (s.name, s.changes, s.cost) == (lv.name, lv.changes, lv.cost)
        assert len(pickle.dumps(s)) < 2_000


def test_a_levers_counts_are_the_changed_plans_without_its_alternatives() -> None:
    """The LoRA lever's counts are gpu_counts of the plan with method.kind lora, the
    same three counts — only the alternatives and rejections are not ranked."""
    plan = with_value(default_plan(), "policy.max_gpus", 64)
    lora = next(lv for lv in fit_levers(plan) if lv.name == "LoRA")
    full = gpu_counts(with_value(plan, "method.kind", "lora"))
    assert lora.counts is not None and full.first_layout.gpus is not None
    assert lora.counts.alternatives == () and lora.counts.rejected == ()
    for name in ("arithmetic_min", "first_layout", "validation_low", "validation_high"):
        assert getattr(lora.counts, name) == getattr(full, name)


def test_a_lever_the_stack_refuses_cannot_run_and_says_why() -> None:
    """Megatron-Core runs no peft LoRA (engine.legality.stack): with the Megatron
    distributed optimizer the LoRA and QLoRA levers are refused — an error naming
    Megatron, no GPU count — while recompute and offload still search."""
    plan = with_values(
        default_plan(), {"parallelism.strategy": "megatron_distopt", "policy.max_gpus": 64}
    )
    got = {s.name: s for s in an.analysis(plan).lever_summaries}
    for name in ("LoRA", "QLoRA"):
        assert got[name].error is not None and "Megatron-Core" in got[name].error
        assert got[name].gpus is None and got[name].layout is None
    for name in ("full activation recompute", "offload to host RAM"):
        assert got[name].error is None and got[name].gpus is not None


def test_the_cli_says_why_a_refused_lever_cannot_run() -> None:
    """``memplan layouts`` prints what the window and the report print for a lever the
    stack refuses ("cannot run: … Megatron-Core …", not "nothing fits"), and its JSON
    carries the same reason as the lever's error."""
    plan = with_values(
        default_plan(), {"parallelism.strategy": "megatron_distopt", "policy.max_gpus": 64}
    )
    a = an.analysis(plan)
    text = render_levers(a.levers, a.counts)
    lora = next(line for line in text.splitlines() if line.startswith("  LoRA "))
    assert "cannot run:" in lora and "Megatron-Core" in lora
    doc = {d["name"]: d for d in levers_json(a.levers)}
    assert doc["LoRA"]["error"] == next(s.error for s in a.lever_summaries if s.name == "LoRA")
