"""Errors the engine raises with a message a user can act on."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Problem:
    """One reason a plan cannot run, and the plan fields it concerns.

    ``fields`` are dotted plan paths (``parallelism.tp``, ``model.architecture.heads``)
    so a view can mark the inputs to change without reading the sentence; ``message``
    is the one wording of the rule, naming those paths.
    """

    fields: tuple[str, ...]
    message: str


class PlanError(ValueError):
    """The plan is valid field by field but cannot be computed as a whole.

    Examples: a layout whose ranks do not multiply to the world size, a TP size that
    does not divide the attention heads. It carries the :class:`Problem` s (a plain
    message becomes one problem without fields); ``str()`` is their messages joined
    by "; ", which is what callers print.
    """

    def __init__(self, problems: str | Iterable[Problem]) -> None:
        found = (Problem((), problems),) if isinstance(problems, str) else tuple(problems)
        self.problems: tuple[Problem, ...] = found
        super().__init__("; ".join(p.message for p in found))


def require(*found: Problem | None) -> None:
    """Raise :class:`PlanError` with every problem found (``None`` is a passed rule)."""
    problems = [p for p in found if p is not None]
    if problems:
        raise PlanError(problems)
