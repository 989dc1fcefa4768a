"""Any name at all changes nothing but the comments and docstrings (issue 33).

A property over arbitrary text (hypothesis) beside the fixed hostile list: every file of
every export of a plan named ``text`` has the same *code* as the same plan named ``X`` —
the same Python AST once the docstrings are set aside, the same shell lines once the
comments are, the same YAML / JSON data — and a Python file's docstring holds the name's one-line
form. In-process only (no child processes), so it can
try many names quickly; ``test_export_injection`` runs the files.
"""

from __future__ import annotations

import ast
import json
from functools import cache
from typing import Any

import yaml
from hostile_names import HOSTILE
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.exports import FORMATS
from engine.fileio.oneline import one_line
from engine.plan import Plan, default_plan, with_values

PLANS = {
    "qlora": {"method.kind": "qlora"},
    "zero3-lora": {
        "stack.name": "hf_trainer",
        "parallelism.strategy": "zero3",
        "method.kind": "lora",
    },
}


def _plan(base: str, name: str) -> Plan:
    return with_values(default_plan(), {**PLANS[base], "model.name": name})


def _code(filename: str, text: str) -> Any:
    """What a file *does*: its AST without docstrings, its non-comment shell lines, its
    data."""
    if filename.endswith(".py"):
        tree = ast.parse(text)
        for node in ast.walk(tree):
            body = getattr(node, "body", None)
            if (
                isinstance(body, list)
                and body
                and isinstance(body[0], ast.Expr)
                and isinstance(body[0].value, ast.Constant)
                and isinstance(body[0].value.value, str)
            ):
                body[0] = ast.Pass()
        return ast.dump(tree)
    if filename.endswith(".sh"):
        return [ln for ln in text.splitlines() if not ln.startswith("#")]
    if filename.endswith((".yaml", ".yml")):
        return yaml.safe_load(text)
    return json.loads(text)


def _files(plan: Plan) -> dict[str, str]:
    out: dict[str, str] = {}
    for fmt, f in FORMATS.items():
        exp = f.export(plan)
        out[f"{fmt}/{exp.filename}"] = exp.text
        out.update({f"{fmt}/{e.filename}": e.text for e in exp.extras})
    return out


@cache
def _plain(base: str) -> dict[str, Any]:
    return {k: _code(k, v) for k, v in _files(_plan(base, "X")).items()}


def _check(name: str) -> None:
    for base in PLANS:
        for key, text in _files(_plan(base, name)).items():
            assert _code(key, text) == _plain(base)[key], (key, name)
            if key.endswith(".py"):  # the name is there, as the docstring's data
                assert one_line(name) in (ast.get_docstring(ast.parse(text)) or ""), key


def test_the_hostile_names_change_only_comments_and_docstrings() -> None:
    for name in HOSTILE.values():
        _check(name)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(min_size=1, max_size=200))
def test_any_name_changes_only_comments_and_docstrings(name: str) -> None:
    _check(name)
