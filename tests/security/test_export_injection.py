"""No plan text ever becomes code (issue 33): hostile names × every exporter, every
generated file parsed by its real parser *and run* in a sandbox with stub frameworks,
and ``--check`` handed the same plans; a payload's marker file never appears.

Before the fix a newline in ``model.name`` became a line of ``megatron_train.sh``, a
``\"\"\"`` closed the docstring of ``peft_config.py`` / the torchtitan recipe (the rest ran
as Python), and the torchtitan ``--check`` imported the recipe, running it.
"""

from __future__ import annotations

import ast
import json
import shutil
import subprocess
import tomllib
import unicodedata
from pathlib import Path
from typing import Any, get_args

import pytest
import yaml
from export_sandbox import make_stubs, markers, recorded_argv, run_python_files, run_scripts
from export_sandbox import stub_env as sandbox_env
from hostile_names import FREE_TEXT_FIELDS, HOSTILE, VALIDATED_TEXT_FIELDS
from pydantic import BaseModel

from engine.exports import FORMATS, Export
from engine.exports.check import check_export
from engine.exports.flat_yaml import read_flat_yaml
from engine.exports.megatron import argv, megatron_args
from engine.fileio.oneline import one_line
from engine.plan import Plan, default_plan, with_values

BASES: dict[str, dict[str, Any]] = {
    "qlora": {"method.kind": "qlora"},
    "zero3-lora": {
        "stack.name": "hf_trainer",
        "parallelism.strategy": "zero3",
        "method.kind": "lora",
    },
    "megatron-tp2": {
        "stack.name": "megatron_core",
        "parallelism.strategy": "megatron_distopt",
        "parallelism.tp": 2,
        "parallelism.dp": 4,
    },
    "custom": {"method.kind": "custom"},
}
"""Plans that between them reach every exporter and companion: the PEFT snippet (with
bitsandbytes), accelerate's ds_config, the Megatron script's exported environment."""


def hostile_plan(base: str, text: str) -> Plan:
    """The base plan with ``text`` in every free-text field."""
    changes: dict[str, Any] = {path: text[:limit] for path, limit in FREE_TEXT_FIELDS.items()}
    changes["method.custom.roles"] = [text, "q"]
    changes["model.hf_config"] = {text: text, "model_type": text}
    return with_values(default_plan(), {**BASES[base], **changes})


def _write(folder: Path, exp: Export) -> None:
    folder.mkdir(parents=True)
    (folder / exp.filename).write_text(exp.text, encoding="utf-8")
    for extra in exp.extras:
        (folder / extra.filename).write_text(extra.text, encoding="utf-8")


@pytest.fixture(scope="module")
def sandbox(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Every (case, base, format) export written to its own folder, with the stubs."""
    root = tmp_path_factory.mktemp("injection")
    bin_dir, mod_dir = make_stubs(root)
    folders: dict[tuple[str, str, str], tuple[Path, Plan, Export]] = {}
    for case, text in HOSTILE.items():
        for base in BASES:
            plan = hostile_plan(base, text)
            for fmt, format_ in FORMATS.items():
                exp = format_.export(plan)
                folder = root / "runs" / case / base / fmt
                _write(folder, exp)
                folders[(case, base, fmt)] = (folder, plan, exp)
    return {"root": root, "bin": bin_dir, "mod": mod_dir, "folders": folders}


def _files(sandbox: dict[str, Any], suffix: str) -> list[Path]:
    return sorted((sandbox["root"] / "runs").rglob(f"*{suffix}"))


def test_every_string_field_of_a_plan_is_covered() -> None:
    """The free-text list is the plan's: a new ``str`` field fails here until it is
    added to the hostile runs (or proven validated)."""

    def walk(model: type[BaseModel], prefix: str) -> set[str]:
        out: set[str] = set()
        for name, info in model.model_fields.items():
            kinds = flat(info.annotation)
            if str in kinds:
                out.add(prefix + name)
            for k in kinds:
                if isinstance(k, type) and issubclass(k, BaseModel):
                    out |= walk(k, f"{prefix}{name}.")
        return out

    def flat(ann: Any) -> set[Any]:
        """Every type an annotation names (``dict[str, Any] | None`` → dict, str, …)."""
        return {ann}.union(*(flat(a) for a in get_args(ann)))

    assert walk(Plan, "") == set(FREE_TEXT_FIELDS) | VALIDATED_TEXT_FIELDS


def test_generated_text_holds_no_control_character(sandbox: dict[str, Any]) -> None:
    """Line breaks are the file's own: no CR, VT, FF, NUL, U+2028…, bidi control or
    lone surrogate of a name survives into any file."""
    for folder, _plan, exp in sandbox["folders"].values():
        for text in [exp.text, *(e.text for e in exp.extras)]:
            bad = {
                unicodedata.name(ch, hex(ord(ch)))
                for ch in set(text)
                if ch != "\n" and not ch.isprintable()
            }
            assert not bad, f"{folder}: {bad}"


def test_every_file_parses_and_keeps_the_name_as_data(sandbox: dict[str, Any]) -> None:
    """Each file through its real parser; a Python file's docstring still names the
    model (one line), so nothing of the name leaked out of it."""
    for path in _files(sandbox, ".py"):
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        case = path.relative_to(sandbox["root"] / "runs").parts[0]
        doc = ast.get_docstring(tree) or ""
        assert one_line(HOSTILE[case]) in doc, path
        calls = {
            n.func.id
            for n in ast.walk(tree)
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
        }
        assert "__import__" not in calls, path
    for path in _files(sandbox, ".json"):
        assert isinstance(json.loads(path.read_text(encoding="utf-8")), dict), path
    for path in _files(sandbox, ".yaml"):
        text = path.read_text(encoding="utf-8")
        assert yaml.safe_load(text) == read_flat_yaml(text), path
    for path in _files(sandbox, ".toml"):  # no exporter writes TOML today; kept honest
        tomllib.loads(path.read_text(encoding="utf-8"))
    assert _files(sandbox, ".py") and _files(sandbox, ".json") and _files(sandbox, ".yaml")


def test_scripts_pass_bash_and_shellcheck(sandbox: dict[str, Any]) -> None:
    scripts = _files(sandbox, ".sh")
    assert scripts
    for s in scripts:
        done = subprocess.run(["bash", "-n", str(s)], capture_output=True, text=True, check=False)
        assert done.returncode == 0, (s, done.stderr)
    if shutil.which("shellcheck") is None:
        pytest.skip("shellcheck is not installed (bootstrap.sh APT_PACKAGES installs it)")
    done = subprocess.run(
        ["shellcheck", "--shell=bash", *map(str, scripts)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-3000:]


def test_scripts_run_with_the_arguments_intact_and_nothing_else(
    sandbox: dict[str, Any],
) -> None:
    """Run in bash with a stub ``torchrun``: exactly one launch, whose argv is the flag
    list MemPlan computed, and no marker."""
    runs = {k: v for k, v in sandbox["folders"].items() if k[2] == "megatron"}
    env = sandbox_env(sandbox["bin"], sandbox["mod"])
    out = run_scripts([f for f, _p, _e in runs.values()], "megatron_train.sh", env)
    assert "FAIL" not in out, out[-3000:]
    for folder, plan, _exp in runs.values():
        (launch,) = recorded_argv(folder)
        assert Path(launch[0]).name == "torchrun"
        assert launch[5:] == ["pretrain_gpt.py", *argv(megatron_args(plan)[0])], folder
    assert markers(sandbox["root"]) == []


def test_python_files_run_without_running_the_name(sandbox: dict[str, Any]) -> None:
    """Every recipe and PEFT snippet run as ``__main__`` (and ``memplan_job()``) with
    stub peft / transformers / torch / torchtitan modules: they run, and run nothing
    else."""
    folders = sorted({p.parent for p in _files(sandbox, ".py")})
    env = sandbox_env(sandbox["bin"], sandbox["mod"])
    assert run_python_files(folders, env) == []
    assert markers(sandbox["root"]) == []


CHECKED = ("newline", "u2028", "triple-double", "export")
CHECK_RUNS = [(b, f) for b in ("qlora", "megatron-tp2") for f in FORMATS]
CHECK_RUNS.append(("zero3-lora", "accelerate"))  # with its ds_config companion
"""A few cases through ``--check`` (each check is a child Python): it reads no text."""


@pytest.mark.parametrize("case", CHECKED)
def test_check_hands_the_framework_data_never_the_generated_code(
    case: str, sandbox: dict[str, Any], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """``--check`` with stub frameworks installed: each one accepts MemPlan's values,
    the Megatron parser receives exactly the computed flags and an environment with
    nothing from the script's text, and no payload runs."""
    record = tmp_path / "record.json"
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PYTHONPATH", str(sandbox["mod"]))
    monkeypatch.setenv("STUB_RECORD", str(record))
    for base, fmt in CHECK_RUNS:
        record.unlink(missing_ok=True)  # each Megatron check writes its own record
        plan = hostile_plan(base, HOSTILE[case])
        exp = FORMATS[fmt].export(plan)
        for r in check_export(exp, plan, timeout=60):
            assert r.ok or not r.available, (fmt, r.message)
            assert r.available or r.format == "accelerate", (fmt, r.message)
        if fmt == "megatron":
            got = json.loads(record.read_text(encoding="utf-8"))
            assert got["argv"] == argv(megatron_args(plan)[0])
            assert "BASH_ENV" not in got["env"] and "LD_PRELOAD" not in got["env"]
            tp = plan.parallelism.tp > 1
            assert ("CUDA_DEVICE_MAX_CONNECTIONS" in got["env"]) == tp
    assert markers(tmp_path) == []
