"""torchtitan's model flavors as MemPlan presets, and its command-line overrides.

A flavor is the key of a model's ``model_registry`` table
(``torchtitan/models/<family>/__init__.py``: llama3 ``8B``/``70B``/``405B``, qwen3
``0.6B`` … ``235B-A22B``, deepseek_v3 ``16B``/``236B``/``671B``); the dims of those
MemPlan has a preset for are the preset's. The command line is ``torchrun --nnodes N
--nproc_per_node G -m torchtitan.train --module M --config F --a.b value`` (or the
0.2-era ``--job.config-file x.toml``); ``--a.b=value`` and bare boolean flags
(``--compile.enable``) are the same tyro overrides.
"""

from __future__ import annotations

import ast
import shlex
from dataclasses import dataclass, field
from typing import Any

from engine.presets import model_section_for
from engine.sections.model import ModelSection

Tree = dict[str, dict[str, Any]]

FLAVORS: dict[tuple[str, str], tuple[str, str]] = {
    ("llama3", "8B"): ("llama-3.1-8b", ""),
    ("llama3", "70B"): ("llama-3.1-70b", ""),
    ("llama3", "405B"): ("llama-3.1-405b", ""),
    ("qwen3", "8B"): ("qwen3-8b", ""),
    ("qwen3", "30B-A3B"): ("qwen3-30b-a3b", ""),
    ("deepseek_v3", "16B"): (
        "deepseek-v2-lite",
        "torchtitan's 16B flavor has DeepSeek-V2-Lite's dims (2048 hidden, 27 layers, "
        "64 experts top-6, 2 shared, MLA kv_lora 512)",
    ),
    ("deepseek_v3", "236B"): ("deepseek-v2", "torchtitan's 236B flavor has DeepSeek-V2's dims"),
    ("deepseek_v3", "671B"): ("deepseek-v3", ""),
}
"""(family, flavor) → (MemPlan preset, why that preset when its name differs)."""

MAX_LINE_CHARS = 40_000
"""The longest text split as shell words (a torchtitan command is a few hundred
characters); a longer one is split on blanks."""

DERIVED: dict[tuple[str, str], tuple[str, str, dict[str, Any]]] = {
    ("qwen3", "14B"): (
        "qwen3-8b",
        "Qwen3-14B",
        {"hidden": 5120, "layers": 40, "heads": 40, "intermediate": 17408},
    ),
    ("qwen3", "32B"): (
        "qwen3-8b",
        "Qwen3-32B",
        {"hidden": 5120, "layers": 64, "heads": 64, "intermediate": 25600},
    ),
}
"""Dense flavors without a MemPlan preset: a preset of the same family with the dims of
torchtitan's table (``models/qwen3/__init__.py`` ``_14b`` / ``_32b``: 8 KV heads of 128,
vocabulary 151,936, untied output — as the 8B)."""

FLAVOR_OF_FUNCTION = {"qwen3_14b": ("qwen3", "14B"), "qwen3_32b": ("qwen3", "32B")}
"""Registry functions whose model is a derived flavor."""

_FAMILY_ALIASES = {"llama3": "llama3", "llama3_ft": "llama3", "deepseek_v3": "deepseek_v3"}


def derived_model(family: str | None, flavor: str | None) -> ModelSection | None:
    """The model of a flavor MemPlan has no preset for but can build, or None."""
    found = DERIVED.get((_FAMILY_ALIASES.get(family or "", family or ""), flavor or ""))
    if found is None:
        return None
    preset, name, dims = found
    base = model_section_for(preset)
    arch = base.architecture.model_copy(update=dims)
    return ModelSection(name=f"{name} (torchtitan flavor)", preset=None, architecture=arch)


def preset_of(family: str | None, flavor: str | None) -> tuple[str, str]:
    """(preset, why) for a torchtitan model; ValueError naming what has no preset."""
    fam = _FAMILY_ALIASES.get(family or "", family or "")
    found = FLAVORS.get((fam, flavor or ""))
    if found is None:
        known = ", ".join(sorted({f"{f} {v}" for f, v in (*FLAVORS, *DERIVED)}))
        raise ValueError(
            f"torchtitan's {fam or '?'} {flavor!r} flavor is not a MemPlan model preset "
            f"(those are {known}); import its config.json first and this file over it"
        )
    return found


@dataclass
class CommandLine:
    """What a torchtitan command line says."""

    tree: Tree = field(default_factory=dict)
    world: int | None = None
    module: str | None = None
    function: str | None = None
    config_file: str | None = None


def _literal(raw: str) -> Any:
    low = raw.lower()
    if low in ("true", "false"):
        return low == "true"
    try:
        return ast.literal_eval(raw)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return raw


def _int(raw: Any) -> int | None:
    try:
        return int(raw)
    except (TypeError, ValueError):
        return None


_LIST_KEYS = {"parallelism.module_fqns_per_model_part"}
"""Overrides whose value is several words (tyro's ``list[list[str]]``: ``a,b c,d``)."""


def _is_subcommand(token: str) -> bool:
    return token.replace("_", "-").startswith("activation-checkpoint:")


def parse_command(text: str) -> CommandLine:
    """The overrides, world, ``--module``/``--config`` and config file of a command; tyro's
    ``--section.no-key`` is ``key = False`` and ``activation-checkpoint:full`` the AC."""
    joined = text.replace("\\\n", " ")
    try:  # shlex is quadratic in a token's length
        long = len(joined) > MAX_LINE_CHARS
        tokens = joined.split() if long else shlex.split(joined, comments=True)
    except ValueError:
        tokens = joined.split()
    out = CommandLine()
    nodes = procs = None
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        i += 1
        if _is_subcommand(tok):
            out.tree.setdefault("activation_checkpoint", {})["mode"] = tok.partition(":")[2]
            continue
        if not tok.startswith("--"):
            continue
        key, eq, inline = tok[2:].partition("=")
        norm = key.replace("-", "_")
        if norm in _LIST_KEYS and not eq:
            words = []
            while (
                i < len(tokens) and not tokens[i].startswith("-") and not _is_subcommand(tokens[i])
            ):
                words.append(tokens[i].split(","))
                i += 1
            sec, _, name = norm.partition(".")
            out.tree.setdefault(sec, {})[name] = words
            continue
        nxt = tokens[i] if i < len(tokens) else None
        if eq:
            raw: Any = inline
        elif nxt is not None and not nxt.startswith("--") and not _is_subcommand(nxt):
            raw, i = nxt, i + 1
        else:
            raw = "true"
        if norm == "nnodes":
            nodes = _int(raw.split(":")[-1])
        elif norm == "nproc_per_node":
            procs = _int(raw)
        elif norm == "module":
            out.module = raw
        elif norm == "config":
            out.function = raw
        elif norm in ("job.config_file", "job.config_path"):
            out.config_file = raw
        elif "." in norm:
            sec, _, name = norm.partition(".")
            if name.startswith("no_") and not eq and raw == "true":
                name, raw = name[3:], "false"
            out.tree.setdefault(sec, {})[name] = _literal(raw)
    if procs:
        out.world = procs * (nodes or 1)
    return out
