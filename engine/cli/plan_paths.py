"""The plan's dotted field paths, and "did you mean" for a path nobody defined: a typo
in ``--set batch.seq_lenn=4096`` should name ``batch.seq_len`` rather than leave the
user to read the schema."""

from __future__ import annotations

import difflib
from typing import Any

from engine.plan import SECTION_ORDER, Plan


def dotted_paths(plan: Plan) -> list[str]:
    """Every leaf field path of ``plan`` (``batch.seq_len``, ``model.architecture.…``)."""
    out: list[str] = []

    def walk(node: Any, prefix: str) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                walk(value, f"{prefix}.{key}" if prefix else str(key))
        else:
            out.append(prefix)

    dump = plan.model_dump(mode="json")
    for name in SECTION_ORDER:
        walk(dump[name], name)
    return out


def did_you_mean(path: str, plan: Plan) -> str:
    """`` — did you mean 'batch.seq_len'?`` for a close known path (difflib's ratio ≥
    0.6, its default), else an empty string."""
    close = difflib.get_close_matches(path, dotted_paths(plan), n=3)
    if not close:
        return ""
    return " — did you mean " + " or ".join(repr(c) for c in close) + "?"
