"""Issue 39's export grid: every plan of :data:`export_grid.GRID` exports whole (nothing
unexpressed), re-imports over a base scrambled in every expressed field to the same
plan and the same estimate to the byte, and — for torchtitan 0.3.0, installed with the
trace extra — passes torchtitan's own ``ConfigManager.parse_args`` (the registry
function, tyro on the recipe's overrides, ``Trainer.Config.__post_init__``) and
``ParallelDims`` over the plan's world. DeepSpeed and Megatron-LM are checked by
``framework_parsers`` in a scratch environment (docs/export-parsers.md)."""

from __future__ import annotations

import importlib.util
import sys
from collections import Counter
from typing import Any

import pytest
from export_grid import GRID, grid_plan
from roundtrip import differences, same_estimate, scrambled

from engine.exports import FORMATS, import_export
from engine.exports.check import CheckResult, check_export, check_titan
from engine.exports.torchtitan import titan_argv
from engine.legality.checks import plan_problems
from engine.plan import get_value


def test_grid_is_at_least_twelve_varied_plans() -> None:
    """The issue's "≥ 12 varied plans, fp16 included": every format, both 16-bit dtypes,
    ZeRO 0–3, FSDP1 and FSDP2, LoRA and QLoRA, TP / CP / PP / EP all present."""
    plans = [(fmt, grid_plan(m, ch)) for _, fmt, m, ch in GRID]
    assert len(plans) >= 12
    assert set(Counter(fmt for fmt, _ in plans)) == set(FORMATS)

    def seen(path: str) -> set[Any]:
        return {get_value(p, path) for _, p in plans}

    assert {"fp16", "bf16"} <= seen("method.precision.compute_dtype")
    strategies = seen("parallelism.strategy")
    assert {"ddp", "zero1", "zero2", "zero3", "fsdp1_full_shard", "fsdp2"} <= strategies
    assert {"full", "lora", "qlora"} <= seen("method.kind")
    assert {"cpu", "nvme"} <= seen("offload.params") | seen("offload.optimizer")
    for axis in ("tp", "cp", "pp", "ep"):
        assert max(seen(f"parallelism.{axis}")) > 1, axis


@pytest.mark.parametrize(("label", "fmt", "model", "changes"), GRID, ids=[g[0] for g in GRID])
def test_grid_plan_reimports_to_the_same_estimate(
    label: str, fmt: str, model: str, changes: dict[str, Any]
) -> None:
    plan = grid_plan(model, changes)
    assert not plan_problems(plan), label
    exp = FORMATS[fmt].export(plan)
    assert exp.unexpressed == (), exp.notes
    base = scrambled(plan, FORMATS[fmt].expressed(plan))
    got = import_export(fmt, exp, base).plan
    assert differences(got, plan) == [], exp.text
    assert same_estimate(got, plan)


TITAN = [g for g in GRID if g[1] == "torchtitan"]
needs_torchtitan = pytest.mark.skipif(
    importlib.util.find_spec("torchtitan") is None or getattr(sys, "frozen", False),
    reason="torchtitan (the trace extra) is not installed",
)


@needs_torchtitan
@pytest.mark.parametrize(("label", "fmt", "model", "changes"), TITAN, ids=[g[0] for g in TITAN])
def test_torchtitan_accepts_the_grid_recipe(
    label: str, fmt: str, model: str, changes: dict[str, Any]
) -> None:
    """torchtitan 0.3.0's ``ConfigManager.parse_args`` takes the recipe's overrides over
    its registry function, and its ``ParallelDims`` the degrees over the plan's world."""
    plan = grid_plan(model, changes)
    (result,) = check_export(FORMATS[fmt].export(plan), plan, timeout=300)
    assert result.available, result.message
    assert result.ok, result.message
    b = plan.batch
    local = b.micro_batch * (b.grad_accum if plan.parallelism.pp > 1 else 1)
    assert f"local batch {local}, " in result.message
    assert f"seq {b.seq_len}," in result.message


def _titan_check(label: str, drop: str = "", rename: tuple[str, str] = ("", "")) -> CheckResult:
    """The check of the grid plan ``label`` with one override dropped or renamed."""
    (_, _, model, changes) = next(g for g in TITAN if g[0] == label)
    plan = grid_plan(model, changes)
    module, function, args = titan_argv(plan)
    args = [rename[1] if a == rename[0] else a for a in args if a != drop]
    return check_titan(module, function, args, plan.parallelism.world_size, 300)


@needs_torchtitan
def test_torchtitan_check_refuses_what_0_3_0_refuses() -> None:
    """The check can fail, with torchtitan's own words: a PP recipe without
    ``--training.disable-cuda-graphs`` (``Trainer.Config._validate_cuda_graphs``), and a
    field of torchtitan main's token-based batch that 0.3.0's tyro does not know."""
    cuda = _titan_check("titan-pp2-hsdp", drop="--training.disable-cuda-graphs")
    assert cuda.available and not cuda.ok
    assert "CUDA graphs do not support pipeline parallelism" in cuda.message
    renamed = ("--training.seq-len", "--training.max-context-length")
    main_era = _titan_check("titan-pp2-hsdp", rename=renamed)
    assert main_era.available and not main_era.ok
    assert "Unrecognized options: --training.max-context-length" in main_era.message
