"""The Megatron script is valid shell that hands torchrun every flag intact (issue 33).

Unquoted, an uneven split's ``--pipeline-model-parallel-layout Ettttttt|tttttttt|…`` was a
pipe (torchrun started without the layout, ``tttttttt: command not found``), a user
layout ``E(tt)*4|…`` a syntax error, and ``t*8`` / ``--moe-layer-freq [0,1,…]`` globs: a
file named ``1`` in the folder made the frequency list ``1`` (every layer MoE). Here the
script runs in bash in a folder holding such files, with a stub ``torchrun`` that records
its argv.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from export_sandbox import make_stubs, markers, recorded_argv, run_scripts, stub_env

from engine.exports.megatron import argv, export_megatron, megatron_args
from engine.plan import Plan, default_plan, with_values
from engine.presets import model_section_for


def _plan(preset: str, changes: dict[str, object]) -> Plan:
    tree = default_plan().model_dump(mode="json")
    tree["model"] = model_section_for(preset).model_dump(mode="json")
    base = Plan.model_validate(tree)
    return with_values(base, {"stack.name": "megatron_core", **changes})


# (plan, flag, the value Megatron must receive — derived by hand)
CASES = {
    # megatron.py _pipeline: stages [6, 8, 10, 8] are neither even nor first/last-only
    # uneven, so the layout: E + 6 t | 8 t | 10 t | 8 t + L (the grammar of Megatron's
    # --pipeline-model-parallel-layout, megatron/training/arguments.py help text).
    "uneven-split": (
        (
            "llama-3.1-8b",
            {"parallelism.pp": 4, "parallelism.dp": 2, "parallelism.pp_layer_split": [6, 8, 10, 8]},
        ),
        "--pipeline-model-parallel-layout",
        "E" + "t" * 6 + "|" + "t" * 8 + "|" + "t" * 10 + "|" + "t" * 8 + "L",
    ),
    # the user's own layout string is written as given: 8 + 8 + 8 + 8 = 32 layers
    "user-layout": (
        (
            "llama-3.1-8b",
            {
                "parallelism.pp": 4,
                "parallelism.dp": 2,
                "parallelism.pp_layout": "E(tt)*4|(t)*8|t*8|(tttt)*2L",
            },
        ),
        "--pipeline-model-parallel-layout",
        "E(tt)*4|(t)*8|t*8|(tttt)*2L",
    ),
    # DeepSeek-V2-Lite: 27 layers, the first dense (first_k_dense_replace = 1), the
    # rest MoE: Megatron's --moe-layer-freq as a Python list, 0 = dense, 1 = MoE.
    "moe-freq": (
        ("deepseek-v2-lite", {}),
        "--moe-layer-freq",
        "[0," + ",".join(["1"] * 26) + "]",
    ),
}

GLOB_BAIT = ("1", "0", ",", "t8", "tt", "Ettttttt", "L")
"""Files that an unquoted ``[0,1,…]``, ``t*8`` or ``E*`` would expand to."""


@pytest.mark.parametrize("case", list(CASES))
def test_the_script_runs_in_bash_with_the_arguments_intact(case: str, tmp_path: Path) -> None:
    (preset, changes), flag, want = CASES[case]
    plan = _plan(preset, changes)
    args = megatron_args(plan)[0]
    assert args[flag] == want  # the exporter computed the hand-derived value
    bin_dir, mod_dir = make_stubs(tmp_path / "stubs")
    run = tmp_path / "run"
    run.mkdir()
    for name in GLOB_BAIT:
        (run / name).write_text("", encoding="utf-8")
    (run / "megatron_train.sh").write_text(export_megatron(plan).text, encoding="utf-8")
    out = run_scripts([run], "megatron_train.sh", stub_env(bin_dir, mod_dir))
    assert "FAIL" not in out, out
    (launch,) = recorded_argv(run)  # one torchrun, nothing piped after it
    assert Path(launch[0]).name == "torchrun"
    assert launch[5:] == ["pretrain_gpt.py", *argv(args)]
    assert launch[launch.index(flag) + 1] == want
    assert markers(tmp_path) == []
