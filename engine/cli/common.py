"""What every subcommand shares: exit codes, user errors, loading the plan a command names
(file, preset or default, with ``--set`` overrides) and the arguments that name it."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any

from pydantic import ValidationError

from engine.cli.arg_types import non_negative_float
from engine.fileio.number_text import number_from_text
from engine.layout.counts import SEARCH_BUDGET_S
from engine.plan import Plan, default_plan, describe_validation_error, get_value, with_values
from engine.planfile import PlanFile, PlanFileError, load
from engine.presets import accelerator_changes, accelerators, model_section_for
from engine.stacks.applicability import set_notes

EXIT_OK, EXIT_BAD_PLAN, EXIT_USAGE = 0, 1, 2

Handler = Callable[[argparse.Namespace], int]


class CliError(Exception):
    """A user error with its exit code; the message is printed as one line."""

    def __init__(self, message: str, code: int = EXIT_BAD_PLAN) -> None:
        super().__init__(message)
        self.code = code


def parse_set(item: str) -> tuple[str, Any]:
    """``section.field=value`` → (path, typed value). JSON values are typed (numbers,
    booleans, null, lists); anything that is not JSON is taken as a string."""
    if "=" not in item:
        raise CliError(f"--set expects section.field=value, got {item!r}", EXIT_USAGE)
    path, raw = item.split("=", 1)
    path = path.strip()
    if not path or "." not in path:
        raise CliError(
            f"--set needs a dotted field path like batch.seq_len, got {path!r}", EXIT_USAGE
        )
    try:
        value: Any = json.loads(raw)
    except ValueError:  # not JSON, or a number past Python's int-digit limit
        number = number_from_text(raw)  # "8,192", "8k": read as the window reads them
        value = raw if number is None else number
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**63:
        value = int(value)  # "1e15" is the whole number the window reads it as
    return path, value


def _typed_for(plan: Plan, item: str) -> tuple[str, Any]:
    """:func:`parse_set`, except that a text field keeps the text as typed: a plan named
    ``8k`` or ``1,000`` is a name, not the number those read as elsewhere."""
    path, value = parse_set(item)
    if isinstance(value, int | float) and not isinstance(value, bool):
        try:
            current = get_value(plan, path)
        except KeyError:
            return path, value  # the plan's validation names the unknown field
        if isinstance(current, str):
            return path, item.split("=", 1)[1]
    return path, value


def apply_sets(plan: Plan, items: Sequence[str], notes: bool = False) -> Plan:
    """Apply ``--set`` overrides with the same validation as a file.

    ``notes``: say on stderr, one line each, which overrides have no effect on the
    resulting plan (``engine.stacks.applicability``) — stdout stays the command's own.
    """
    if not items:
        return plan
    changes = with_accelerator_figures(dict(_typed_for(plan, i) for i in items), notes)
    try:
        result = with_values(plan, changes)
    except KeyError as exc:
        from engine.cli.plan_paths import did_you_mean  # only on an error: keep startup lean

        unknown = next((p for p in changes if f"{p!r}" in str(exc.args[0])), "")
        raise CliError(f"--set: {exc.args[0]}{did_you_mean(unknown, plan)}") from exc
    except ValidationError as exc:
        problems = describe_validation_error(exc, "plan")
        raise CliError("; ".join(problems)) from exc
    if notes:
        for line in set_notes(result, list(changes)):
            print(f"memplan: note: {line}", file=sys.stderr)
    return result


def with_accelerator_figures(changes: dict[str, Any], notes: bool) -> dict[str, Any]:
    """``--set hardware.accelerator=KEY`` applies the preset's figures, as choosing it in
    the window does: the key alone would leave the old accelerator's capacity deciding fit.
    Figures set explicitly in the same command win over the preset's."""
    key = changes.get("hardware.accelerator")
    if not isinstance(key, str) or key not in {a.key for a in accelerators()}:
        return changes  # "custom", or unknown: the plan's validation names the known keys
    figures = {k: v for k, v in accelerator_changes(key).items() if k not in changes}
    if notes and figures:
        names = ", ".join(k.split(".", 1)[1] for k in figures)
        print(f"memplan: note: hardware.accelerator={key} also sets {names}", file=sys.stderr)
    return {**figures, **changes}


def load_plan(args: argparse.Namespace) -> tuple[Plan, PlanFile | None]:
    """The plan named on the command line (file, preset or default) with overrides."""
    pf: PlanFile | None = None
    if getattr(args, "plan", None):
        try:
            pf = load(args.plan)
        except PlanFileError as exc:
            raise CliError(f"{args.plan}: {exc}") from exc
        plan = pf.plan
        for msg in pf.extra_messages:
            print(f"memplan: note: {msg}", file=sys.stderr)
    else:
        plan = default_plan()
    if getattr(args, "preset", None):
        plan = with_model(plan, args.preset)
    return apply_sets(plan, getattr(args, "set", None) or [], notes=True), pf


def with_model(plan: Plan, preset: str) -> Plan:
    """The plan with its model replaced by a preset's (the rest of the plan kept)."""
    try:
        model = model_section_for(preset)
    except KeyError as exc:
        raise CliError(str(exc.args[0])) from exc
    return Plan.model_validate(
        {**plan.model_dump(mode="json"), "model": model.model_dump(mode="json")}
    )


def plan_args(p: argparse.ArgumentParser, plan_required: bool = False) -> None:
    """Add PLAN, ``--preset`` and ``--set``: how a subcommand names its plan."""
    if plan_required:
        p.add_argument("plan", metavar="PLAN", help="a .memplan file")
    else:
        p.add_argument(
            "plan",
            metavar="PLAN",
            nargs="?",
            help="a .memplan file (default: the built-in default plan)",
        )
    p.add_argument("--preset", metavar="NAME", help="use this model preset (see `memplan models`)")
    p.add_argument(
        "--set",
        metavar="SECTION.FIELD=VALUE",
        action="append",
        default=[],
        help="override one input (repeatable); values are JSON, else strings",
    )


def search_budget_arg(p: argparse.ArgumentParser) -> None:
    """Add ``--search-budget SECONDS``: how long a GPU-count search may run."""
    p.add_argument(
        "--search-budget",
        type=non_negative_float,
        default=SEARCH_BUDGET_S,
        metavar="SECONDS",
        help=(
            f"wall-clock budget of each GPU-count search (default {SEARCH_BUDGET_S:g}; "
            "0: unbounded, so the answer never depends on the machine's speed)"
        ),
    )


def search_budget(args: argparse.Namespace) -> float | None:
    """The search budget ``--search-budget`` asked for (None: unbounded)."""
    seconds: float = args.search_budget
    return seconds or None


def quiet_broken_pipe() -> None:
    """Make ``memplan estimate | head`` end quietly when the reader closes the pipe."""
    with contextlib.suppress(BrokenPipeError):
        sys.stdout.flush()
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
