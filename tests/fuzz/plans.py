"""Random valid plans, driven by the Plan model itself: every leaf field, a value drawn
from its own type and bounds (Literal choices, ``ge``/``le``, optional, tuples), applied
to a golden seed through ``with_values`` so every cross-field rule still holds.

``random_value`` serves the file mutator too (plausible values get past validation and
reach the estimate); ``plans()`` wraps ``random_plan`` as a hypothesis strategy.
"""

from __future__ import annotations

import random
import types
import typing
from typing import Any

from annotated_types import Ge, Gt, Le, Lt, MaxLen, MinLen
from hypothesis import strategies as st
from pydantic import BaseModel, ValidationError

from engine.plan import Plan, with_values
from tests.fuzz.corpus import seed_plans

Leaf = tuple[str, Any, list[Any]]  # path, annotation, constraints

MODERATE = 4096
"""Most drawn integers stay at or below this; one in eight goes to the field's bounds
(extreme but valid plans are part of the contract too)."""

ODD_TEXT = ("", "x", "Ä plan", "\u202ereversed", "tab\there", "😀", "a" * 200, "名前")


def _model_of(annotation: Any) -> type[BaseModel] | None:
    for arg in (annotation, *typing.get_args(annotation)):
        if isinstance(arg, type) and issubclass(arg, BaseModel):
            return arg
    return None


def leaves(plan: Plan) -> list[Leaf]:
    """Every leaf field the plan holds (a nested optional model only when present)."""
    out: list[Leaf] = []

    def walk(model: type[BaseModel], value: Any, prefix: str) -> None:
        for name, info in model.model_fields.items():
            path = f"{prefix}{name}"
            child = getattr(value, name)
            sub = _model_of(info.annotation)
            if sub is not None and child is not None:
                walk(sub, child, f"{path}.")
            else:
                out.append((path, info.annotation, list(info.metadata)))

    walk(Plan, plan, "")
    return out


def _bounds(meta: list[Any], low: float, high: float) -> tuple[float, float]:
    for m in meta:
        if isinstance(m, Ge):
            low = max(low, float(m.ge))  # type: ignore[arg-type]
        elif isinstance(m, Gt):
            low = max(low, float(m.gt) + 1e-9)  # type: ignore[arg-type]
        elif isinstance(m, Le):
            high = min(high, float(m.le))  # type: ignore[arg-type]
        elif isinstance(m, Lt):
            high = min(high, float(m.lt) - 1e-9)  # type: ignore[arg-type]
    return low, high


def _int(rng: random.Random, meta: list[Any]) -> int:
    low, high = (int(b) for b in _bounds(meta, -(2**31), 2**31))
    if rng.random() < 0.125:
        return rng.choice([low, high, low + 1, max(low, high - 1)])
    top = min(high, max(low, MODERATE))
    pick = rng.choice([rng.randint(low, top), 2 ** rng.randint(0, 12), rng.randint(low, low + 8)])
    return min(max(pick, low), high)


def _float(rng: random.Random, meta: list[Any]) -> float:
    low, high = _bounds(meta, -1e9, 1e9)
    if rng.random() < 0.125:
        return rng.choice([low, high])
    return round(rng.uniform(low, min(high, max(low, 100.0))), 3)


def random_value(rng: random.Random, annotation: Any, meta: list[Any]) -> Any:
    """A value of the field's own type within its bounds (it may still break a
    cross-field rule; ``with_values`` then refuses it)."""
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is typing.Literal:
        return rng.choice(args)
    if origin in (typing.Union, types.UnionType):
        options = [a for a in args if a is not type(None)]
        if type(None) in args and rng.random() < 0.25:
            return None
        return random_value(rng, rng.choice(options), meta)
    if origin is tuple:
        low, high = (int(b) for b in _bounds_len(meta))
        size = rng.randint(low, min(high, low + 4))
        return [random_value(rng, args[0], []) for _ in range(size)]
    if annotation is bool:
        return rng.random() < 0.5
    if annotation is int:
        return _int(rng, meta)
    if annotation is float:
        return _float(rng, meta)
    if annotation is str:
        low, high = (int(b) for b in _bounds_len(meta))
        text = rng.choice(ODD_TEXT)[:high]
        return text if len(text) >= low else "x" * low
    if origin is dict:  # free JSON (model.hf_config): a few keys of any JSON value
        keys = rng.sample(ODD_TEXT, k=rng.randint(0, 3))
        return {k: rng.choice([None, 1, -0.5, k, [k], {k: k}]) for k in keys}
    if _model_of(annotation) is not None:
        return None  # absent optional model: turning it on is the seeds' job
    raise TypeError(f"no generator for {annotation!r}")


def _bounds_len(meta: list[Any]) -> tuple[int, int]:
    low = next((m.min_length for m in meta if isinstance(m, MinLen)), 0)
    high = next((m.max_length for m in meta if isinstance(m, MaxLen)), 8)
    return low, high


def random_plan(rng: random.Random, max_edits: int = 4) -> Plan:
    """A golden seed with up to ``max_edits`` random field changes that validate."""
    seeds = seed_plans()
    plan = seeds[rng.choice(sorted(seeds))]
    for _ in range(rng.randint(0, max_edits)):
        path, annotation, meta = rng.choice(leaves(plan))
        try:
            plan = with_values(plan, {path: random_value(rng, annotation, meta)})
        except (ValidationError, KeyError):
            continue
    return plan


def plans(max_edits: int = 4) -> st.SearchStrategy[Plan]:
    """Hypothesis plans (the randomness comes from hypothesis, so runs are seeded)."""
    return st.builds(random_plan, st.randoms(use_true_random=False), st.just(max_edits))
