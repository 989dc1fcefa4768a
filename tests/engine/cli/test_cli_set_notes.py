"""``--set`` of a field that has no effect on the plan says so on stderr, one line each;
stdout is the command's own output, unchanged."""

from __future__ import annotations

import json

import pytest

from engine.cli import main
from engine.plan import default_plan, with_values
from engine.stacks.applicability import inapplicable, reason_for, set_notes

NOTE = (
    "memplan: note: --set parallelism.knobs.ds_overlap_comm has no effect under fsdp2: "
    "DeepSpeed ZeRO knob; the strategy is fsdp2\n"
)


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    rc = main(argv)
    out, err = capsys.readouterr()
    return rc, out, err


def test_an_idle_set_is_noted_on_stderr(capsys: pytest.CaptureFixture[str]) -> None:
    """The default plan is FSDP2: a DeepSpeed knob changes nothing, and the note says so;
    the estimate's figures are those of the plan without the override."""
    rc, out, err = _run(
        ["estimate", "--json", "--set", "parallelism.knobs.ds_overlap_comm=true"], capsys
    )
    assert rc == 0 and err == NOTE
    rc, plain, plain_err = _run(["estimate", "--json"], capsys)
    assert rc == 0 and plain_err == ""
    with_set, without = json.loads(out), json.loads(plain)
    for doc in (with_set, without):
        doc.pop("config_hash", None)
        doc.pop("stack", None)  # lists the inputs left to the stack: the set one is not
    assert with_set == without


@pytest.mark.parametrize(
    "command", [["layouts", "--gpus", "8"], ["export", "--format", "torchtitan"]]
)
def test_every_plan_command_notes_idle_sets(
    command: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    rc, _out, err = _run([*command, "--set", "parallelism.knobs.ds_overlap_comm=true"], capsys)
    assert rc == 0
    assert NOTE in err


def test_a_set_that_applies_is_silent(capsys: pytest.CaptureFixture[str]) -> None:
    rc, _out, err = _run(
        [
            "estimate",
            "--set",
            "parallelism.strategy=zero3",
            "--set",
            "parallelism.knobs.ds_overlap_comm=false",
        ],
        capsys,
    )
    assert rc == 0 and err == ""


def test_notes_follow_the_final_plan_and_name_what_idles_the_field() -> None:
    """The strategy set later in the same command decides; method fields name the method."""
    plan = with_values(default_plan(), {"parallelism.strategy": "zero2"})
    assert set_notes(plan, ["parallelism.knobs.ds_reduce_bucket_elements"]) == []
    assert set_notes(plan, ["parallelism.knobs.fsdp_prefetch_units", "method.lora.rank"]) == [
        "--set parallelism.knobs.fsdp_prefetch_units has no effect under zero2: "
        "FSDP2 knob; the strategy is zero2",
        "--set method.lora.rank has no effect under method.kind full: "
        "LoRA settings apply to method.kind lora or qlora (now full)",
    ]


def test_fsdp1_no_shard_reads_no_bucket_and_no_gather_knob() -> None:
    """NO_SHARD all-reduces each unit's ``flat_param.grad`` in place from its
    post-backward hook (torch/distributed/fsdp/_runtime_utils.py): no DDP reducer, so
    DDP's bucket_cap_mb has no effect, and it gathers no unit, so neither has FSDP1's
    limit_all_gathers."""
    reasons = inapplicable(with_values(default_plan(), {"parallelism.strategy": "fsdp1_no_shard"}))
    assert reason_for("parallelism.knobs.ddp_bucket_cap_mb", reasons) == (
        "DDP knob; the strategy is fsdp1_no_shard"
    )
    assert reason_for("parallelism.knobs.fsdp1_limit_all_gathers", reasons) == (
        "FSDP1 knob; FSDP1 NO_SHARD does not read it"
    )
