"""A stage's numbers are the sums of its rows; work shared for speed changes no row.

A stage's numbers and its rows come from one set of parts
(:class:`engine.ledger.stage_rows.StageNumbers`: the shared rows with their sums, the
make-up's fixed and varying parts), so the numbers' phases and peak moments follow from
its moments by the same function as a timeline's. An activation part hands its row its
own span and moments (:func:`engine.ledger.activations.varying.built`), but whether the
part counts as allocated is kept equal to its row's location and state by agreement, so
what is left to check is that each moment is the sum of the allocated rows live then.
The rows themselves come from work shared between stages and plans: the shared
rows once per kind of stage and shape-free plan (:mod:`engine.ledger.stage_shared`,
:mod:`engine.ledger.memo`), a stage's layer kinds once per make-up
(:func:`engine.ledger.activations.stage_layers.stage_layers`), the communication pass
once per kind of stage, the all-stage offload loop skipped when nothing is offloaded.
Each is compared here with the plain assembly it replaced — every stage built from
scratch, row for row — on the plans the benchmark times and on random small pipelined
plans.
"""

from __future__ import annotations

import itertools
from typing import Any

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from engine.errors import PlanError
from engine.estimate import Estimate, estimate
from engine.ledger.activations import hf
from engine.ledger.activations import megatron as mg
from engine.ledger.activations.geometry import geometry, terms_bytes, trainability
from engine.ledger.activations.loss import logits_rows
from engine.ledger.activations.rows import activation_rows
from engine.ledger.activations.schedule import in_flight
from engine.ledger.activations.stage_layers import context, stage_layers
from engine.ledger.nodes.communication import stage_communication, step_communication
from engine.ledger.nodes.host import host_rows
from engine.ledger.nodes.node_view import node_view
from engine.ledger.nodes.transfers import step_transfers
from engine.ledger.peaks.backward_grads import backward_grad_rows
from engine.ledger.peaks.buckets import accumulation_rows, bucket_rows
from engine.ledger.peaks.checkpoint_event import checkpoint_rows
from engine.ledger.peaks.dequantize import dequantize_rows
from engine.ledger.peaks.float8 import float8_rows
from engine.ledger.peaks.gathered import gathered_rows
from engine.ledger.peaks.optimizer_in_backward import in_backward_rows
from engine.ledger.peaks.optimizer_step import deepspeed_step_rows, optimizer_temp_rows
from engine.ledger.peaks.runtime import runtime_rows
from engine.ledger.phases import moment_sums
from engine.ledger.placement import stage_layer_ranges
from engine.ledger.precision import resolve_formats
from engine.ledger.row import Row
from engine.ledger.states.persistent import (
    offloaded_stage_rows,
    persistent_stage_rows,
    stage_held,
    stage_placed,
    stage_shard_elems,
)
from engine.plan import Plan, default_plan, with_values
from engine.presets import plan_for_model_preset
from engine.stacks.defaults import resolved
from engine.stacks.families import rule_of
from tests.bench_engine import DEEPSEEK, PP16_INTERLEAVED


def _unfolded_rows(plan: Plan, stage: int) -> list[Row]:
    """One stage's rows (before the allocator reserve) built from scratch, in the order
    ``estimate()`` lists them: the assembly before stages shared any work."""
    arch, par = plan.model.architecture, plan.parallelism
    rule = rule_of(par.strategy)
    formats = resolve_formats(plan.method.precision)
    placed = stage_placed(plan, stage)
    held = list(stage_held(plan, stage)[0])
    layers = stage_layer_ranges(arch, par)[stage]
    rows: list[Row] = persistent_stage_rows(plan, stage)
    rows += activation_rows(plan, stage, len(layers), placed)
    if stage == par.pp - 1:
        rows += logits_rows(plan, geometry(plan), in_flight(plan, stage))
    shard = max((t.group for t in held), default=1)
    gathered = gathered_rows(plan, placed, formats, shard, rule, stage)
    rows += gathered
    rows += bucket_rows(plan, held, formats, rule, shard)
    in_hbm = any(r.state == "grads" and r.location == "hbm" for r in rows)
    stepped = plan.method.optimizer.in_backward
    ctx = stage_held(plan, stage)[1]
    rows += (
        in_backward_rows(plan, held, ctx)
        if stepped
        else backward_grad_rows(plan, held, ctx, in_hbm)
    )
    rows += accumulation_rows(plan, held, rule)
    if plan.method.kind == "qlora":
        rows += dequantize_rows(held, plan.method.qlora, plan.runtime.allocation_granularity_bytes)
    rows += float8_rows(plan.method.precision, placed, plan.runtime.allocation_granularity_bytes)
    rows += [] if stepped else optimizer_temp_rows(plan, held, rule)
    rows += deepspeed_step_rows(plan, held, rule)
    unit = max((r.high for r in gathered if r.role == "root_unit"), default=0)
    rows += checkpoint_rows(plan, unit)
    rows += runtime_rows(plan, stage)
    return rows


def _layer_kinds(plan: Plan, stage: int) -> tuple[tuple[str, int, int], ...]:
    """(name, bytes, layers keeping their saved set) of each layer kind of ``stage``, in
    order of first appearance, by walking its layers one by one and building every
    layer's terms (the counting before kinds were cached by make-up)."""
    arch, par = plan.model.architecture, plan.parallelism
    g, tr = geometry(plan), trainability(plan)
    megatron = plan.runtime.activation_profile == "megatron"
    c = context(plan, g, tr)
    rec = plan.method.recompute

    def kind(is_moe: bool, ing: bool) -> list[Any]:
        if megatron:
            terms = mg.layer_terms(
                g,
                mlp="gelu" if arch.mlp == "gelu" else "swiglu",
                attention=plan.runtime.attention,
                selective=c.selective,
                dropout=tr.dropout,
                qk_norm=arch.qk_norm,
            )
        else:
            width = hf.dense_width(arch, g.tp)
            terms = hf.layer_terms(c, moe_layer=is_moe, dense_width=width, ing=ing)
        name = ("MoE" if is_moe else "dense" if arch.moe else "") + (
            "" if ing else " first (frozen embedding)"
        )
        return [name.strip() or "decoder", terms_bytes(terms, g), 0]

    layers = stage_layer_ranges(arch, par)[stage]
    seen: dict[tuple[bool, bool], list[Any]] = {}
    for pos, i in enumerate(layers):
        is_moe = not megatron and arch.moe is not None and arch.moe.is_moe_layer(i)
        ckpt = rec.policy == "full" or (
            rec.policy == "every_k"
            and (pos < len(layers) // rec.every_k if megatron else i % rec.every_k == 0)
        )
        ing = ckpt or not (stage == 0 and not tr.embedding and pos == 0)
        if (is_moe, ing) not in seen:
            seen[(is_moe, ing)] = kind(is_moe, ing)
        seen[(is_moe, ing)][2] += 0 if ckpt else 1
    if not seen:
        seen[(False, True)] = kind(False, True)
    return tuple((n, b, saved) for n, b, saved in seen.values())


def _assert_unfolded(plan: Plan, est: Estimate) -> None:
    """Every stage of ``est`` equals the from-scratch assembly: rows (reserve aside) and
    each moment's sum of them; the communication pass equals the busiest of every
    stage's own collectives; the node view equals the all-stage loop."""
    r = resolved(plan)
    accumulating = r.batch.grad_accum > 1
    for st_est in est.stages:
        sl = stage_layers(r, st_est.stage)
        assert tuple((k.name, k.bytes, k.saved) for k in sl.kinds) == _layer_kinds(r, st_est.stage)
        want = _unfolded_rows(r, st_est.stage)
        assert list(st_est.rows[:-1]) == want, st_est.stage
        sums = moment_sums(want, accumulating)
        assert [(v.low, v.high) for v in st_est.moments.values()] == list(sums)
    per_stage = [stage_communication(r, s) for s in range(r.parallelism.pp)]
    busiest = max(
        range(len(per_stage)), key=lambda s: (sum(t.intra + t.inter for t in per_stage[s]), -s)
    )
    comm = step_communication(r)
    assert (comm.stage, comm.transfers) == (busiest, per_stage[busiest])
    moved = {s: offloaded_stage_rows(r, s) for s in range(r.parallelism.pp)}
    heavy = max(moved, key=lambda s: (sum(x.high for x in moved[s]), -s))
    v = node_view(r)
    assert (v.stage, v.offloaded) == (heavy, tuple(moved[heavy]))
    assert (v.trainable_shard_elems, v.param_shard_elems) == stage_shard_elems(r, heavy)


NAMED: tuple[tuple[str, dict[str, Any]], ...] = (
    ("llama-3.1-70b", PP16_INTERLEAVED),
    ("deepseek-v3", DEEPSEEK),
    ("llama-3.1-8b", {"parallelism.pp": 4, "parallelism.dp": 2, "batch.grad_accum": 8}),
    (
        "qwen1.5-moe-a2.7b",
        {"parallelism.pp": 3, "parallelism.dp": 2, "method.recompute.policy": "every_k"},
    ),
    (
        "llama-3.2-1b",
        {
            "parallelism.strategy": "zero3",
            "parallelism.pp": 1,
            "offload.optimizer": "cpu",
            "offload.params": "cpu",
        },
    ),
)


def test_benchmark_plans_equal_the_unfolded_assembly() -> None:
    for name, changes in NAMED:
        plan = with_values(plan_for_model_preset(name), changes)
        _assert_unfolded(plan, estimate(plan))
        longer = with_values(plan, {"batch.seq_len": 2 * plan.batch.seq_len})
        _assert_unfolded(longer, estimate(longer))


TINY = {
    "family": "llama",
    "hidden": 64,
    "heads": 4,
    "kv_heads": 2,
    "intermediate": 128,
    "vocab": 100,
}
MOE = {"num_experts": 4, "top_k": 2, "expert_intermediate": 32}


@st.composite
def pipelined(draw: st.DrawFn) -> Plan:
    """A tiny model on 1–5 stages under a random schedule, split, recompute policy,
    strategy, method and offload (an illegal draw is discarded by the test)."""
    layers = draw(st.integers(2, 11))
    pp = draw(st.integers(1, min(5, layers)))
    arch: dict[str, Any] = {"layers": layers}
    if draw(st.booleans()):
        arch["moe"] = {**MOE, "first_dense_layers": draw(st.integers(0, 2))}
    schedule = draw(st.sampled_from(["1f1b", "interleaved_1f1b", "gpipe"]))
    changes: dict[str, Any] = {
        "parallelism__pp": pp,
        "parallelism__pp_schedule": schedule if pp > 1 else "1f1b",
        "parallelism__strategy": draw(
            st.sampled_from(["fsdp2", "ddp", "zero1", "zero3", "megatron_distopt"])
        ),
        "parallelism__dp": draw(st.sampled_from([1, 2])),
        "batch__grad_accum": draw(st.integers(1, 6)),
        "method__recompute__policy": draw(
            st.sampled_from(["none", "full", "selective", "every_k"])
        ),
        "method__kind": draw(st.sampled_from(["full", "lora"])),
        "runtime__activation_profile": draw(st.sampled_from(["hf-transformers", "megatron"])),
        "offload__optimizer": draw(st.sampled_from(["none", "cpu"])),
    }
    if schedule == "interleaved_1f1b" and pp > 1:
        changes["parallelism__virtual_stages"] = draw(st.integers(1, 2))
    if pp > 1 and draw(st.booleans()):
        cuts = sorted(draw(st.sets(st.integers(1, layers - 1), min_size=pp - 1, max_size=pp - 1)))
        bounds = [0, *cuts, layers]
        changes["parallelism__pp_layer_split"] = [b - a for a, b in itertools.pairwise(bounds)]
    try:
        return with_values(
            default_plan(),
            {
                "model.architecture": {**TINY, **arch},
                "batch.seq_len": 4,
                "hardware.gpus_per_node": 4,
                **{k.replace("__", "."): v for k, v in changes.items()},
            },
        )
    except ValueError:
        assume(False)
        raise


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pipelined(), st.integers(1, 3), st.integers(1, 9))
def test_random_pipelined_plans_equal_the_unfolded_assembly(
    plan: Plan, micro_batch: int, seq_len: int
) -> None:
    """Each plan, and then the same plan with another micro-batch shape — whose shared
    rows and node ledgers come from the cache the first one filled
    (:mod:`engine.ledger.shape_free`) — equals its from-scratch assembly."""
    other = with_values(plan, {"batch.micro_batch": micro_batch, "batch.seq_len": seq_len})
    try:
        ests = [(p, estimate(p)) for p in (plan, other)]
    except PlanError:
        assume(False)
        return
    for p, est in ests:
        _assert_unfolded(p, est)
        r = resolved(p)
        fresh = (node_view(r), host_rows(r, node_view(r)), step_transfers(r, node_view(r)))
        assert (est.nodes.view, list(est.nodes.host), est.nodes.transfers) == fresh
