"""Read torchtitan's Python configuration — a ``config_registry.py`` function building
``Trainer.Config(training=TrainingConfig(...), parallelism=ParallelismConfig(...), ...)``,
or a recipe module of ``config.<section>.<key> = <literal>`` lines — without running it.

Only the syntax tree is walked (``ast``): keyword arguments whose value is a literal or
integer arithmetic (``8 * 2048``) are taken, ``model_registry("8B")`` names the flavor,
``FullAC.Config()`` / ``SelectiveAC.Config()`` / ``None`` the activation checkpointing,
and ``config = other_function()`` starts from another function of the same file. A file
holding several recipe functions is read only for the one the user names (the registry
files hold dozens, and merging them would describe no job).
"""

from __future__ import annotations

import ast
import operator
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

Tree = dict[str, dict[str, Any]]

_AC = {"FullAC": "full", "SelectiveAC": "selective", "None": "none"}
_OPS: dict[type, Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.FloorDiv: operator.floordiv,
}
_MAX_CALL_DEPTH = 8
_SKIP = object()


@dataclass
class Recipe:
    """What a recipe sets: sections of settings, AC policy, model flavor and family."""

    tree: Tree = field(default_factory=dict)
    ac: str | None = None
    flavor: str | None = None
    family: str | None = None
    base_fn: str | None = None
    function: str | None = None


def _value(node: ast.expr) -> Any:
    """A literal, or integer arithmetic over literals; anything else is ``_SKIP``."""
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        pass
    if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
        left, right = _value(node.left), _value(node.right)
        if type(left) is int and type(right) is int and abs(left) < 2**40 and abs(right) < 2**40:
            if isinstance(node.op, ast.FloorDiv) and right == 0:
                return _SKIP
            return _OPS[type(node.op)](left, right)
    return _SKIP


def _head(node: ast.expr) -> str:
    return ast.unparse(node).split("(")[0].split(".")[0]


def _flavor(node: ast.expr, names: dict[str, str]) -> str | None:
    if isinstance(node, ast.Name):
        return names.get(node.id)
    if (
        isinstance(node, ast.Call)
        and ast.unparse(node.func).endswith("model_registry")
        and node.args
        and isinstance(node.args[0], ast.Constant)
    ):
        return str(node.args[0].value)
    return None


def _ac(node: ast.expr) -> str:
    if isinstance(node, ast.Constant) and node.value is None:
        return "none"
    return _AC.get(_head(node), "full")


def _settings(call: ast.Call) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for kw in call.keywords:
        if kw.arg is not None:
            v = _value(kw.value)
            if v is not _SKIP:
                out[kw.arg] = v
    return out


class _Reader:
    def __init__(self, module: ast.Module) -> None:
        self.funcs: dict[str, list[ast.stmt]] = {
            f.name: f.body for f in module.body if isinstance(f, ast.FunctionDef)
        }
        self.out = Recipe()
        self.imported = {
            a.asname or a.name
            for n in module.body
            if isinstance(n, ast.ImportFrom) and (n.module or "").endswith("config_registry")
            for a in n.names
        }

    def section(self, name: str, node: ast.expr, names: dict[str, str]) -> None:
        if name == "model_spec":
            self.out.flavor = _flavor(node, names) or self.out.flavor
        elif name == "activation_checkpoint":
            self.out.ac = _ac(node)
        elif isinstance(node, ast.Call):
            self.out.tree[name] = _settings(node)

    def trainer(self, call: ast.Call, names: dict[str, str]) -> None:
        for kw in call.keywords:
            if kw.arg is not None:
                self.section(kw.arg, kw.value, names)

    def function(self, name: str, depth: int = 0) -> None:
        if depth > _MAX_CALL_DEPTH:
            raise ValueError(f"recipe {name} calls other recipes more than {_MAX_CALL_DEPTH} deep")
        names: dict[str, str] = {}
        for node in (n for stmt in self.funcs[name] for n in ast.walk(stmt)):
            value = getattr(node, "value", None)
            if isinstance(node, ast.Return) and isinstance(value, ast.Call):
                self.trainer(value, names)
            if not isinstance(node, ast.Assign) or len(node.targets) != 1:
                continue
            target = ast.unparse(node.targets[0]).split(".")
            called = ast.unparse(node.value.func) if isinstance(node.value, ast.Call) else ""
            if len(target) == 1 and isinstance(node.value, ast.Call):
                flavor = _flavor(node.value, {})
                if flavor is not None:
                    names[target[0]] = flavor
                elif called in self.funcs and called != name:
                    self.function(called, depth + 1)
                elif called in self.imported:
                    self.out.base_fn = called
                elif called.endswith("Config"):
                    self.trainer(node.value, names)
            elif len(target) == 2:
                self.section(target[1], node.value, names)
            elif len(target) == 3:
                v = _value(node.value)
                if v is not _SKIP:
                    self.out.tree.setdefault(target[1], {})[target[2]] = v


def _is_recipe(f: ast.FunctionDef) -> bool:
    returns = ast.unparse(f.returns) if f.returns is not None else ""
    return "Config" in returns or any(
        isinstance(n, ast.Return)
        and isinstance(n.value, ast.Call)
        and "Trainer" in ast.unparse(n.value.func)
        for n in ast.walk(f)
    )


def _family(module: ast.Module, function: str | None) -> str | None:
    for node in module.body:
        if isinstance(node, ast.ImportFrom) and any(a.name == "model_registry" for a in node.names):
            parts = (node.module or "").split(".")
            if len(parts) >= 3 and parts[:2] == ["torchtitan", "models"]:
                return parts[2]
    for fam in ("deepseek_v3", "llama3", "qwen3", "llama4", "gpt_oss"):
        if function and function.startswith(fam):
            return fam
    return None


def _legacy(module: ast.Module) -> Recipe:
    """A recipe module: top-level ``config.<section>.<key> = …`` and the registry
    function it imports."""
    out = Recipe()
    for node in module.body:
        if isinstance(node, ast.ImportFrom) and (node.module or "").endswith("config_registry"):
            out.base_fn = node.names[0].name
    r = _Reader(module)
    r.funcs["<module>"] = module.body
    r.out = out
    r.function("<module>")
    return out


def recipe_functions(text: str) -> list[str]:
    """The recipe functions a torchtitan registry file defines, in file order — what
    the window offers when the file holds several (parsed, never executed); empty for
    a file that is not Python or holds none."""
    try:
        module = ast.parse(text)
    except (SyntaxError, ValueError):
        return []
    return [f.name for f in module.body if isinstance(f, ast.FunctionDef) and _is_recipe(f)]


def read_recipe(module: ast.Module, function: str | None) -> Recipe:
    """The settings of the recipe function ``function`` (or the file's only one)."""
    recipes = [f.name for f in module.body if isinstance(f, ast.FunctionDef) and _is_recipe(f)]
    if function is None and not recipes:
        return _legacy(module)
    if function is None and len(recipes) > 1:
        shown = ", ".join(recipes[:4]) + (", …" if len(recipes) > 4 else "")
        raise ValueError(
            f"it holds {len(recipes)} recipe functions ({shown}): name the one to read "
            "as FILE::function"
        )
    name = function or recipes[0]
    r = _Reader(module)
    if name not in r.funcs:
        raise ValueError(f"it has no function {name!r}")
    r.function(name)
    r.out.function = name
    r.out.family = _family(module, name)
    return r.out
