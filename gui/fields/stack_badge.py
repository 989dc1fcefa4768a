"""The "from stack" badge: which inputs take their value from the training stack.

A field left at ``auto`` is not "unset": the engine computes with the chosen stack's
value (:func:`engine.stacks.defaults.resolve_stack_defaults`). The window says so beside
the field — the stack and the value it gave — so an analyst reading "auto" knows what
was computed, and why (the tooltip names the framework code). Free of Qt, so the texts
are tested on their own.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from engine.plan import Plan
from engine.stacks.catalog import stack_info
from engine.stacks.defaults import Derived, resolve_stack_defaults
from gui.fields.fieldspec import choice_text

STACK_PATH = "stack.name"
"""The stack chooser itself: at ``auto`` it is derived from the strategy and method."""

BADGE_CHARS = 22
"""Longest value shown in a badge (the caption column is narrow); the tooltip has it all."""

NO_DERIVED: Mapping[str, Derived] = MappingProxyType({})


def derived_inputs(plan: Plan) -> Mapping[str, Derived]:
    """Every input whose value comes from the stack, by path, with the stack chooser
    itself when it is ``auto``. Empty when the stack cannot be resolved."""
    try:
        r = resolve_stack_defaults(plan)
    except (KeyError, ValueError):
        return NO_DERIVED
    if plan.stack.name != "auto":
        return r.derived
    chooser = Derived(
        r.stack,
        r.stack,
        f"auto picks {stack_info(r.stack).label} for strategy {plan.parallelism.strategy} "
        f"and method {choice_text(plan.method.kind)}",
        stack_info(r.stack).source,
    )
    return MappingProxyType({STACK_PATH: chooser, **r.derived})


def derived_for(derived: Mapping[str, Derived], path: str) -> Derived | None:
    """The stack value behind ``path``, or behind the band ``path`` is the low or high of."""
    found = derived.get(path)
    if found is None and path.endswith((".low", ".high")):
        found = derived.get(path.rsplit(".", 1)[0])
    return found


def short_value(value: Any) -> str:
    """A derived value as the badge shows it (``True`` as "on", long names cut)."""
    text = ("on" if value else "off") if isinstance(value, bool) else str(value)
    return text if len(text) <= BADGE_CHARS else text[: BADGE_CHARS - 1] + "…"


def badge_caption(path: str, d: Derived, shown: str | None = None) -> str:
    """The caption beside a derived field: the stack, then the value it gave (``shown``:
    the field's own text for it, e.g. a size in the user's unit)."""
    head = "auto picks" if path == STACK_PATH else f"from stack {d.stack}"
    return f"{head}<br>= {shown if shown is not None else short_value(d.value)}"


def badge_tooltip(d: Derived) -> str:
    """The tooltip's first lines: what the stack gave and why, with the source key."""
    what = "the band shown" if isinstance(d.value, dict) else short_value(d.value)
    return f"<b>From stack {d.stack}: {what}</b> — {d.why} <i>(source: {d.source})</i>"
