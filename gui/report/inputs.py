"""The plan's inputs, section by section, each marked when it equals its default.

A value counts as a default when it equals the same field of a freshly built section
(``type(section)()``), compared leaf by leaf. That matters for the model section: its
defaults describe Llama-3.1-8B, so a 70B plan's architecture fields are not defaults
even though the section has them — while the model's unrelated fields still can be.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from engine.plan import SECTION_ORDER, Plan, free_json_paths
from engine.units import fmt_gb, fmt_gib, fmt_range

_MISSING = object()


@dataclass(frozen=True, slots=True)
class InputLine:
    """One leaf input: its dotted path, shown value, default and description."""

    path: str
    value: Any
    default: Any
    description: str

    @property
    def has_default(self) -> bool:
        return self.default is not _MISSING

    @property
    def is_default(self) -> bool:
        return self.default is not _MISSING and self.value == self.default

    @property
    def default_text(self) -> str:
        return "—" if self.default is _MISSING else show(self.path, self.default)

    @property
    def value_text(self) -> str:
        return show(self.path, self.value)


SHOWN_JSON_CHARS = 80
"""A free JSON object longer than this (an imported config.json) is named, not printed."""


def show(path: str, value: Any) -> str:
    """A value as a reader wants it: thousands separators, sizes for byte fields."""
    if value is None:
        return "none (derived)"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        text = f"{value:,}"
        if "bytes" in path and value >= 10**6:
            text += f" B ({fmt_gb(value)} / {fmt_gib(value)})"
        return text
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, dict) and set(value) == {"low", "high"}:
        lo, hi = value["low"], value["high"]
        if "bytes" in path:
            return f"{lo:,}–{hi:,} B ({fmt_range(lo, hi, 'both')})"
        return f"{lo:g}–{hi:g}"
    if isinstance(value, dict) and len(json.dumps(value)) > SHOWN_JSON_CHARS:
        kind = value.get("model_type")
        return f"JSON object of {len(value)} keys" + (f" ({kind})" if isinstance(kind, str) else "")
    if isinstance(value, list | tuple | dict):
        return json.dumps(value)
    return str(value)


def _descriptions(model: type[BaseModel], prefix: str, out: dict[str, str]) -> None:
    for name, info in model.model_fields.items():
        path = f"{prefix}.{name}"
        out[path] = info.description or ""
        ann = info.annotation
        if isinstance(ann, type) and issubclass(ann, BaseModel):
            _descriptions(ann, path, out)


def _flatten(tree: Any, prefix: str, out: dict[str, Any]) -> None:
    """Leaf inputs by path; a free JSON input (``free_json_paths``) is one leaf."""
    if isinstance(tree, dict) and tree and prefix not in free_json_paths():
        for key, value in tree.items():
            _flatten(value, f"{prefix}.{key}", out)
    else:
        out[prefix] = tree


def section_inputs(plan: Plan, section: str) -> list[InputLine]:
    """The leaf inputs of one section, in declaration order."""
    current = getattr(plan, section)
    fresh = type(current)()
    values: dict[str, Any] = {}
    defaults: dict[str, Any] = {}
    _flatten(current.model_dump(mode="json"), section, values)
    _flatten(fresh.model_dump(mode="json"), section, defaults)
    descriptions: dict[str, str] = {}
    _descriptions(type(current), section, descriptions)
    lines = []
    for path, value in values.items():
        desc = descriptions.get(path) or descriptions.get(path.rsplit(".", 1)[0], "")
        lines.append(InputLine(path, value, defaults.get(path, _MISSING), desc))
    return lines


def all_inputs(plan: Plan) -> dict[str, list[InputLine]]:
    """Every section's inputs, in the plan's section order."""
    return {s: section_inputs(plan, s) for s in SECTION_ORDER}
