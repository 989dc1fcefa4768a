"""``export --check`` tells three outcomes apart (issue 39): accepted, refused with the
framework's own words, and "could not check here" — a GPU the framework asked for, or a
package it could not import, named right. A stand-in ``megatron`` package on the
child's ``PYTHONPATH`` plays each part (Megatron-LM is not installed in CI)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from engine.exports import FORMATS
from engine.exports.check import check_export
from engine.presets import default_plan

_ARGPARSE = """
import argparse
def parse_args():
    p = argparse.ArgumentParser(prog="pretrain_gpt.py")
    p.add_argument("--main-grads-dtype", choices=["fp32", "bf16"], default="fp32")
    p.parse_args(["--main-grads-dtype", "fp16"])
def validate_args(args):
    pass
"""
_GPU = """
import argparse
def parse_args():
    return argparse.Namespace(data_parallel_size=8)
def validate_args(args):
    raise RuntimeError("No CUDA GPUs are available")
"""
_DEPENDENCY = """
import transformer_engine_stand_in_xyz
"""
_ACCEPTS = """
import argparse
def parse_args():
    return argparse.Namespace(data_parallel_size=8)
def validate_args(args):
    pass
"""


def _megatron(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, body: str) -> tuple[bool, bool, str]:
    pkg = tmp_path / "megatron" / "training"
    pkg.mkdir(parents=True)
    (tmp_path / "megatron" / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    (pkg / "arguments.py").write_text(body)
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    plan = default_plan()
    (result,) = check_export(FORMATS["megatron"].export(plan), plan, timeout=60)
    return result.available, result.ok, result.message


pytestmark = pytest.mark.skipif(
    getattr(sys, "frozen", False), reason="the bundle runs no child interpreter"
)


def test_argparse_refusal_shows_argparses_words_not_systemexit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    available, ok, message = _megatron(tmp_path, monkeypatch, _ARGPARSE)
    assert available and not ok
    assert message.startswith("Megatron-LM argparse: pretrain_gpt.py: error: argument")
    assert "invalid choice: 'fp16'" in message and "SystemExit" not in message


def test_a_gpu_the_framework_asks_for_is_could_not_check_not_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    available, ok, message = _megatron(tmp_path, monkeypatch, _GPU)
    assert (available, ok) == (False, False)
    assert message == (
        "could not check here (needs a GPU): Megatron-LM validate_args (parse_args accepted "
        "the flags): RuntimeError: No CUDA GPUs are available"
    )


def test_a_missing_dependency_is_named_not_the_framework(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    available, ok, message = _megatron(tmp_path, monkeypatch, _DEPENDENCY)
    assert (available, ok) == (False, False)
    assert message == (
        "could not check here (needs package transformer_engine_stand_in_xyz, which "
        "megatron imports)"
    )


def test_a_framework_that_accepts_says_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert _megatron(tmp_path, monkeypatch, _ACCEPTS) == (
        True,
        True,
        "Megatron-LM validate_args: DP 8",
    )
