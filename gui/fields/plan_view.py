"""One plan as the input tabs show it, computed once per plan for every tab.

Each field needs its value, whether it applies, and whether the stack gave its value;
asking the plan for each of these per field (a model dump, an applicability pass, a
stack resolution every time) is what made a redraw slow. A :class:`PlanView` answers
all three from one pass, cached per plan.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from engine.plan import Plan
from engine.stacks.applicability import inapplicable, reason_for
from engine.stacks.defaults import resolved
from gui.fields.stack_badge import derived_inputs

AUTO_BAND_REASON = "auto: the stack's default (shown); choose custom above to edit"
"""Why the low and high of a band left at auto are read-only."""


def lookup(values: dict[str, Any], path: str) -> Any:
    """The JSON value at a dotted path (KeyError or TypeError when there is none)."""
    node: Any = values
    for key in path.split("."):
        node = node[key]
    return node


class PlanView:
    """A plan's values as JSON, why a field does not apply, and what the stack gave."""

    def __init__(self, plan: Plan) -> None:
        self.plan = plan
        self.values: dict[str, Any] = plan.model_dump(mode="json")
        self.derived = derived_inputs(plan)
        self._reasons = inapplicable(plan)
        self._memo: dict[str, str | None] = {}
        self._resolved: dict[str, Any] | None = None

    def value(self, path: str) -> Any:
        """The plan's value at ``path``; inside a band left at auto (None), the value the
        engine computes with — the stack's."""
        try:
            return lookup(self.values, path)
        except (KeyError, TypeError):
            if self._resolved is None:
                self._resolved = resolved(self.plan).model_dump(mode="json")
            return lookup(self._resolved, path)

    def band_is_auto(self, path: str) -> bool:
        """Whether ``path`` is the low or high of a band the plan leaves at auto."""
        if not path.endswith((".low", ".high")):
            return False
        try:
            return lookup(self.values, path.rsplit(".", 1)[0]) is None
        except (KeyError, TypeError):
            return False

    def reason(self, path: str) -> str | None:
        """Why the field at ``path`` is read-only now (None: it is editable)."""
        if path not in self._memo:
            why = reason_for(path, self._reasons) if self._reasons else None
            self._memo[path] = why or (AUTO_BAND_REASON if self.band_is_auto(path) else None)
        return self._memo[path]


@lru_cache(maxsize=4)
def plan_view(plan: Plan) -> PlanView:
    return PlanView(plan)
