"""Which implementation traces a plan, and what torchtitan refuses (no torch needed).

``memplan trace`` runs torchtitan's own code when the plan's stack resolves to
``torchtitan`` (``engine/trace/titan/support.py``); ``pytorch`` and ``hf_trainer`` keep
transformers' modules. A plan torchtitan 0.3.0 cannot run is refused with one sentence.
"""

from __future__ import annotations

import importlib.util

import pytest

from engine.cli import main
from engine.plan import Plan, with_values
from engine.trace.titan.support import MISSING, ac_mode, titan_refusal, uses_titan
from tests.trace.grid import tiny_arch
from tests.trace.titan_grid import TitanCase


def _titan(**changes: object) -> Plan:
    return with_values(TitanCase(world=8).plan(), dict(changes))


@pytest.mark.parametrize(
    ("stack", "titan"), [("torchtitan", True), ("pytorch", False), ("hf_trainer", False)]
)
def test_the_stack_picks_the_implementation(stack: str, titan: bool) -> None:
    assert uses_titan(with_values(Plan(), {"stack.name": stack})) is titan


def test_the_grid_plan_is_runnable() -> None:
    """Runnable where torchtitan is installed; else the one reason is what to install."""
    reason = titan_refusal(_titan())
    if importlib.util.find_spec("torchtitan") is None:
        assert reason is not None and "pip install 'memplan[trace]'" in reason
    else:
        assert reason is None


@pytest.mark.parametrize(
    ("changes", "words"),
    [
        ({"parallelism.tp": 3, "parallelism.dp": 2}, "tp (3) must divide 32, 8 and 14336"),
        ({"parallelism.pp": 2, "parallelism.dp": 4}, "pipeline, context and expert"),
        ({"method.optimizer.name": "sgd"}, "optimizer is AdamW"),
        ({"runtime.loss_impl": "fused"}, "no fused cross-entropy"),
        ({"runtime.loss_impl": "vocab_parallel"}, "no vocab-parallel cross-entropy"),
        ({"runtime.loss_impl": "compiled"}, "compiled loss"),
        ({"runtime.loss_impl": "chunked", "batch.seq_len": 2052}, "multiple of it"),
        ({"runtime.attention": "eager"}, "flex attention only"),
        ({"method.recompute.policy": "offload"}, "no activation offload"),
        ({"method.kind": "lora"}, "full training only"),
        ({"method.precision.policy": "fp32", "method.precision.compute_dtype": "fp32"},
         "bf16 FSDP2 mixed precision"),
    ],
)  # fmt: skip
def test_what_torchtitan_cannot_run_is_refused(changes: dict[str, object], words: str) -> None:
    reason = titan_refusal(_titan(**changes))
    assert reason is not None and words in reason and "\n" not in reason


def test_a_family_torchtitan_has_no_model_for_is_refused() -> None:
    arch = tiny_arch("gemma2").model_dump(mode="json")
    plan = with_values(
        Plan(), {"stack.name": "torchtitan", "model.preset": None, "model.architecture": arch}
    )
    reason = titan_refusal(plan)
    assert reason is not None and "no gemma2 model" in reason


@pytest.mark.parametrize(
    ("policy", "mode"),
    [("none", "none"), ("full", "full (FullAC"), ("selective", "selective op (SelectiveAC"),
     ("every_k", "selective layer every 3 ")],
)  # fmt: skip
def test_the_record_names_the_ac_mode(policy: str, mode: str) -> None:
    plan = _titan(**{"method.recompute.policy": policy, "method.recompute.every_k": 3})
    assert ac_mode(plan).startswith(mode)


def test_the_cli_refuses_with_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    """Refused before anything is built: one line, exit 1."""
    assert main(["trace", "--set", "stack.name=torchtitan", "--set", "runtime.loss=fused"]) == 1
    err = capsys.readouterr().err.strip()
    assert "fused" in err and "\n" not in err


def test_the_torchtitan_defaults_are_what_the_trace_runs() -> None:
    """A plan left at auto under torchtitan runs the chunked loss and zero_fill, and the
    trace reads those resolved fields (not ``runtime.loss``)."""
    from engine.stacks.defaults import resolved

    rt = resolved(with_values(Plan(), {"stack.name": "torchtitan"})).runtime
    assert (rt.loss_impl, rt.zero_grad) == ("chunked", "zero_fill")
    assert titan_refusal(_titan(**{"runtime.loss_impl": "chunked"})) in (None, MISSING)


def test_the_grid_plans_say_their_loss_and_zero_grad() -> None:
    """Ledger and trace describe the same step: the grid sets both explicitly."""
    rt = TitanCase(loss="standard").plan().runtime
    assert (rt.loss_impl, rt.zero_grad) == ("eager", "zero_fill")
    rt = TitanCase(loss="chunked", zero_grad="set_to_none").plan().runtime
    assert (rt.loss_impl, rt.zero_grad) == ("chunked", "set_to_none")
