"""``import(export(plan))`` restores every field the export expressed, for every format,
over stacks × strategies × methods × offload × parallelism; a plan whose export lists
nothing unexpressed comes back whole, with the same estimate to the byte."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError
from roundtrip import differences, same_estimate, scrambled

from engine.exports import FORMATS, import_export
from engine.legality.checks import plan_problems
from engine.plan import Plan, default_plan, with_values
from engine.presets import model_section_for

MODELS = ("llama-3.1-8b", "mixtral-8x7b", "qwen2.5-7b", "gemma-2-9b", "deepseek-v2-lite")
EXTRA_MODELS = ("llama-3.1-70b",)


def _with_model(preset: str) -> Plan:
    tree = default_plan().model_dump(mode="json")
    tree["model"] = model_section_for(preset).model_dump(mode="json")
    return Plan.model_validate(tree)


BASES = {m: _with_model(m) for m in MODELS + EXTRA_MODELS}


@st.composite
def plans(draw: st.DrawFn) -> Plan:
    model = draw(st.sampled_from(MODELS))
    moe = BASES[model].model.architecture.moe is not None
    ch: dict[str, Any] = {
        "stack.name": draw(
            st.sampled_from(
                ["auto", "pytorch", "hf_trainer", "torchtitan", "deepspeed", "megatron_core"]
            )
        ),
        "parallelism.strategy": draw(
            st.sampled_from(
                [
                    "ddp",
                    "zero1",
                    "zero2",
                    "zero3",
                    "fsdp1_full_shard",
                    "fsdp1_hybrid_shard",
                    "fsdp2",
                    "fsdp2_hsdp",
                    "megatron_distopt",
                ]
            )
        ),
        "method.kind": draw(st.sampled_from(["full", "full", "lora", "qlora"])),
        "parallelism.tp": draw(st.sampled_from([1, 1, 2])),
        "parallelism.pp": draw(st.sampled_from([1, 1, 2])),
        "parallelism.cp": draw(st.sampled_from([1, 1, 2])),
        "parallelism.ep": draw(st.sampled_from([1, 2])) if moe else 1,
        "parallelism.dp": draw(st.sampled_from([1, 2, 4, 8, 16])),
        "batch.micro_batch": draw(st.integers(1, 4)),
        "batch.grad_accum": draw(st.integers(1, 4)),
        "method.precision.policy": draw(
            st.sampled_from(["auto", "auto", "amp_master", "autocast", "pure_16bit"])
        ),
        "method.precision.compute_dtype": draw(st.sampled_from(["bf16", "bf16", "fp16"])),
        "method.recompute.policy": draw(
            st.sampled_from(["auto", "none", "full", "selective", "offload"])
        ),
    }
    off = draw(st.sampled_from(["none", "none", "opt_cpu", "all_cpu", "all_nvme"]))
    ch["offload.optimizer"] = "none" if off == "none" else off.split("_")[1]
    ch["offload.params"] = off.split("_")[1] if off.startswith("all") else "none"
    if draw(st.booleans()):
        ch["parallelism.knobs.ds_reduce_bucket_elements"] = draw(st.integers(1, 10**9))
        ch["parallelism.knobs.fsdp_reshard_after_forward"] = draw(st.sampled_from([True, False, 2]))
    if ch["parallelism.pp"] == 2 and draw(st.booleans()):
        layers = BASES[model].model.architecture.layers
        first = draw(st.integers(1, layers - 1))
        ch["parallelism.pp_layer_split"] = [first, layers - first]
    try:
        plan = with_values(BASES[model], ch)
    except (ValidationError, ValueError):
        assume(False)
        raise AssertionError from None  # unreachable: assume raises
    assume(not plan_problems(plan))
    return plan


def _check(fmt: str, plan: Plan) -> None:
    exp, expressed = FORMATS[fmt].export(plan), FORMATS[fmt].expressed(plan)
    lost = {u.field for u in exp.unexpressed}
    fields = expressed - lost
    base = scrambled(plan, fields)
    got = import_export(fmt, exp, base).plan
    assert differences(got, plan, fields, lost) == [], exp.text
    if not exp.unexpressed:
        assert differences(got, plan) == [], exp.text
        assert same_estimate(got, plan)


@pytest.mark.parametrize("fmt", sorted(FORMATS))
@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.filter_too_much, HealthCheck.too_slow],
)
@given(plan=plans())
def test_round_trip_restores_every_expressed_field(fmt: str, plan: Plan) -> None:
    _check(fmt, plan)


WHOLE_JOBS: list[tuple[str, str, dict[str, Any]]] = [
    (
        "deepspeed",
        "llama-3.1-8b",
        {
            "stack.name": "deepspeed",
            "parallelism.strategy": "zero3",
            "parallelism.dp": 16,
            "batch.grad_accum": 4,
            "offload.optimizer": "nvme",
            "offload.params": "nvme",
            "parallelism.knobs.ds_prefetch_bucket_elements": 12_345_678,
            "method.precision.grad_dtype": "fp32",
            "method.recompute.policy": "full",
        },
    ),
    (  # issue 16: 70B, ZeRO-3, CPU offload, fp32 weights + autocast
        "deepspeed",
        "llama-3.1-70b",
        {
            "stack.name": "deepspeed",
            "parallelism.strategy": "zero3",
            "offload.optimizer": "cpu",
            "offload.params": "cpu",
            "method.precision.policy": "autocast",
        },
    ),
    (
        "deepspeed",
        "qwen2.5-7b",
        {
            "stack.name": "hf_trainer",
            "method.kind": "lora",
            "parallelism.strategy": "zero2",
            "offload.optimizer": "cpu",
        },
    ),
    (
        "accelerate",
        "llama-3.1-8b",
        {
            "stack.name": "hf_trainer",
            "parallelism.strategy": "fsdp2_hsdp",
            "parallelism.dp": 16,
            "parallelism.shard_group_size": 4,
            "parallelism.tp": 2,
            "offload.params": "cpu",
            "offload.optimizer": "cpu",
            "method.recompute.policy": "full",
            "parallelism.knobs.fsdp_reshard_after_forward": False,
        },
    ),
    (
        "accelerate",
        "mixtral-8x7b",
        {"stack.name": "hf_trainer", "parallelism.strategy": "zero3", "parallelism.dp": 8},
    ),
    (
        "torchtitan",
        "llama-3.1-8b",
        {
            "stack.name": "torchtitan",
            "parallelism.strategy": "fsdp2_hsdp",
            "parallelism.dp": 8,
            "parallelism.shard_group_size": 4,
            "parallelism.pp": 2,
            "parallelism.pp_layer_split": [14, 18],
            "batch.grad_accum": 4,
        },
    ),
    (
        "megatron",
        "mixtral-8x7b",
        {
            "stack.name": "megatron_core",
            "parallelism.strategy": "megatron_distopt",
            "parallelism.tp": 2,
            "parallelism.pp": 4,
            "parallelism.pp_layer_split": [7, 9, 9, 7],
            "parallelism.ep": 2,
            "parallelism.dp": 2,
            "parallelism.sequence_parallel": True,
            "offload.optimizer": "cpu",
            "method.recompute.policy": "selective",
        },
    ),
    (
        "megatron",
        "qwen2.5-7b",
        {
            "stack.name": "megatron_core",
            "parallelism.strategy": "ddp",
            "parallelism.pp": 4,
            "parallelism.pp_layer_split": [6, 8, 9, 5],
            "parallelism.dp": 2,
        },
    ),
]


@pytest.mark.parametrize(("fmt", "model", "changes"), WHOLE_JOBS)
def test_whole_job_comes_back_with_the_same_estimate(
    fmt: str, model: str, changes: dict[str, Any]
) -> None:
    """A plan every input of which the format can say: the export lists nothing, and
    the import over the default plan gives the plan back, estimate to the byte."""
    plan = with_values(BASES[model], changes)
    assert not plan_problems(plan)
    exp = FORMATS[fmt].export(plan)
    assert exp.unexpressed == (), exp.notes
    got = import_export(fmt, exp, scrambled(plan, FORMATS[fmt].expressed(plan))).plan
    assert differences(got, plan) == []
    assert same_estimate(got, plan)
