"""A config exported from a plan that does not fit says so: in the export's notes (what
the CLI and the report print) and, where the format takes comments, in the file's first
lines — a ds_config handed on without its plan must not read as a recipe that runs.
JSON takes no comments, so a ds_config carries it in its notes only."""

from __future__ import annotations

from dataclasses import replace

from engine.errors import PlanError
from engine.estimate import VERDICT_WORDS, estimate
from engine.exports.common import Export
from engine.plan import Plan

NO_COMMENTS = frozenset({"deepspeed"})
"""Formats whose file cannot hold a comment (JSON)."""


def fit_warning(plan: Plan) -> str | None:
    """One sentence when the plan does not fit (or straddles the limit), else None."""
    try:
        est = estimate(plan)
    except PlanError:
        return None  # an uncomputable plan is refused before any export is written
    if est.verdict == "fits":
        return None
    return (
        f"WARNING: MemPlan's estimate for this plan: {VERDICT_WORDS[est.verdict]} "
        f"({est.verdict_reason}); this config is not expected to run as it is"
    )


def with_fit_warning(exp: Export, plan: Plan) -> Export:
    """``exp`` with the fit warning first in its notes and, where the format allows,
    as a comment at the top of its file (after a ``#!`` line)."""
    warning = fit_warning(plan)
    if warning is None:
        return exp
    text = exp.text
    if exp.format not in NO_COMMENTS:
        comment = f"# {' '.join(warning.split())}\n"
        if text.startswith("#!"):
            first, _, rest = text.partition("\n")
            text = f"{first}\n{comment}{rest}"
        else:
            text = comment + text
    return replace(exp, text=text, advice=(warning, *exp.advice))
