"""Hypothesis plans through every view that exists: estimate, GPU counts (searching up
to 16 GPUs), diagnostics, sensitivity, fit, every exporter, the terminal's text and JSON
forms, and the PDF report on a few. Only PlanError may refuse, in under 300 characters."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings

from engine.plan import Plan
from tests.fuzz.plans import plans
from tests.fuzz.run_files import cli_views, plan_views
from tests.fuzz.run_gui import report_case
from tests.fuzz.tally import Tally

QUIET = {"database": None, "deadline": None, "derandomize": True}


@settings(max_examples=60, suppress_health_check=[HealthCheck.too_slow], **QUIET)
@given(plan=plans())
def test_every_engine_view_of_a_random_plan(plan: Plan) -> None:
    tally = Tally("views")
    plan_views(plan, "hypothesis plan", tally)
    assert tally.ok, tally.problems()


@settings(
    max_examples=15,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
    **QUIET,
)
@given(plan=plans())
def test_the_terminal_forms_of_a_random_plan(tmp_path: Path, plan: Plan) -> None:
    tally = Tally("cli views")
    cli_views(plan, tmp_path, "hypothesis plan", tally)
    assert tally.ok, tally.problems()


@settings(
    max_examples=3,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
    **QUIET,
)
@given(plan=plans())
def test_the_pdf_report_of_a_random_plan(qtbot: Any, tmp_path: Path, plan: Plan) -> None:
    tally = Tally("report")
    report_case(plan, tmp_path, "hypothesis plan", tally)
    assert tally.ok, tally.problems()
