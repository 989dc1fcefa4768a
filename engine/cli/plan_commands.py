"""Subcommands about one plan: ``estimate``, ``new``, ``validate`` and ``models``."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from engine.analysis import analysis
from engine.cli.common import (
    EXIT_BAD_PLAN,
    EXIT_OK,
    CliError,
    apply_sets,
    load_plan,
    plan_args,
    search_budget,
    search_budget_arg,
)
from engine.cli.json_form import estimate_json
from engine.cli.text import render, render_counts
from engine.errors import PlanError
from engine.estimate import estimate
from engine.exports.cached_model import (
    CachedModelSection,
    model_section_for_cached,
    plan_for_cached_model,
)
from engine.fileio.oneline import one_line
from engine.models.hf_cache import ModelNotCachedError
from engine.models.hf_config import ConfigImportError
from engine.models.presets import format_models_table, preset_names
from engine.models.safetensors_index import SafetensorsError
from engine.models.summary import summarize
from engine.plan import Plan, default_plan
from engine.planfile import PlanFile, PlanFileError, load, save
from engine.reference.deepspeed_estimator import deepspeed_reference
from engine.stacks.defaults import resolve_stack_defaults, stack_label
from engine.units import fmt_bytes


def cmd_estimate(args: argparse.Namespace) -> int:
    plan, _ = load_plan(args)
    a = analysis(plan, search_budget(args))
    try:
        est = a.estimate
    except PlanError as exc:
        raise CliError(f"plan cannot be computed: {exc}") from exc
    if args.json:
        doc = estimate_json(est, include_stages=args.stages)
        doc["stack"] = _stack_json(plan)
        if args.reference:
            doc["reference"] = _reference_json(plan)
        print(json.dumps(doc, indent=2))
    else:
        print(
            render(est, args.units, stages=args.stages, phases=args.phases, formulas=args.formulas)
        )
        print(_stack_text(plan, args.formulas))
        if args.reference:
            print(_reference_text(plan))
        if not args.no_counts:
            print("\n" + render_counts(a.counts))
    return EXIT_OK


def _stack_json(plan: Plan) -> dict[str, Any]:
    """The stack the plan runs on and every input it left to the stack's default."""
    r = resolve_stack_defaults(plan)
    return {
        "name": r.stack,
        "requested": plan.stack.name,
        "label": stack_label(plan),
        "derived": {
            path: {"value": d.value, "why": d.why, "source": d.source}
            for path, d in sorted(r.derived.items())
        },
    }


def _stack_text(plan: Plan, formulas: bool) -> str:
    r = resolve_stack_defaults(plan)
    how = " (auto)" if plan.stack.name == "auto" else ""
    head = (
        f"\nTraining stack: {stack_label(plan)} — stack.name {r.stack}{how}; "
        f"{len(r.derived)} input(s) left to its defaults"
    )
    if not formulas:
        return head + " (--formulas lists them)"
    lines = [head + ":"]
    for path, d in sorted(r.derived.items()):
        value = json.dumps(d.value) if isinstance(d.value, dict) else d.value
        lines.append(f"  {path} = {value}  — {d.why} [{d.source}]")
    return "\n".join(lines)


def _reference_json(plan: Plan) -> dict[str, Any] | None:
    ref = deepspeed_reference(plan)
    if ref is None:
        return None
    return {
        "tool": "deepspeed",
        "stage": ref.stage,
        "cpu_bytes_per_node": ref.cpu_bytes_per_node,
        "gpu_bytes_per_gpu": ref.gpu_bytes_per_gpu,
        "formula": ref.formula,
    }


def _reference_text(plan: Plan) -> str:
    ref = deepspeed_reference(plan)
    if ref is None:
        return "\nReference (DeepSpeed estimator): only defined for ZeRO-2 and ZeRO-3 plans"
    return (
        f"\nReference — DeepSpeed's ZeRO-{ref.stage} cold estimator (model states only, "
        f"host × 1.5):\n  per GPU {fmt_bytes(ref.gpu_bytes_per_gpu)}; host RAM per node "
        f"{fmt_bytes(ref.cpu_bytes_per_node)}\n  ({ref.formula})"
    )


def _cached(args: argparse.Namespace) -> CachedModelSection:
    """The ``--model ORG/NAME`` of the local Hugging Face cache, notes printed to stderr."""
    try:
        found = model_section_for_cached(args.model, args.revision, mtp=args.mtp)
    except (ModelNotCachedError, ConfigImportError, SafetensorsError) as exc:
        hint = ""
        if args.model in preset_names():  # a preset's name given as a Hub id
            hint = f" — {args.model!r} is a model preset: use --preset {args.model}"
        raise CliError(f"{exc}{hint}") from exc
    for msg in found.messages:
        print(f"memplan: note: {args.model}: {msg}", file=sys.stderr)
    return found


def cmd_new(args: argparse.Namespace) -> int:
    if args.model and args.preset:
        raise CliError("--model and --preset both name the model; give one")
    if args.model:
        plan = plan_for_cached_model(default_plan(), _cached(args).section)
        plan = apply_sets(plan, args.set)
    else:
        plan, _ = load_plan(args)
    out = Path(args.output)
    if out.exists() and not args.force:
        raise CliError(f"{out} exists; pass --force to overwrite it")
    try:
        save(PlanFile(plan=plan, name=args.name or out.stem), out)
    except OSError as exc:
        raise CliError(f"cannot write {out}: {exc.strerror or exc}") from exc
    print(f"wrote {out} (config {plan.config_hash()[:12]})")
    return EXIT_OK


def cmd_validate(args: argparse.Namespace) -> int:
    shown = one_line(str(args.plan))  # a path or a plan's name may hold control characters
    try:
        pf = load(args.plan)
    except PlanFileError as exc:
        for problem in exc.problems:
            print(f"memplan: {shown}: {one_line(str(problem))}", file=sys.stderr)
        return EXIT_BAD_PLAN
    for msg in pf.extra_messages:
        print(f"note: {one_line(msg)}")
    try:
        estimate(pf.plan)
    except PlanError as exc:
        print(f"memplan: {shown}: plan cannot be computed: {one_line(str(exc))}", file=sys.stderr)
        return EXIT_BAD_PLAN
    print(f"{shown}: valid MemPlan plan '{one_line(pf.name)}', config {pf.config_hash}")
    return EXIT_OK


def cmd_models(args: argparse.Namespace) -> int:
    if not args.model:
        print(format_models_table())
        return EXIT_OK
    found = _cached(args)
    spec = found.section.architecture
    s = summarize(spec)
    print(
        f"{args.model} ({spec.family}, {found.found.commit[:12]}): {s.total:,} parameters, "
        f"{s.active_per_token:,} active per token, {s.embedding:,} embedding\n"
        f"  from {found.found.snapshot}"
    )
    return EXIT_OK


def _model_args(p: argparse.ArgumentParser) -> None:
    """``--model ORG/NAME`` (local Hugging Face cache, offline), ``--revision``, ``--mtp``."""
    p.add_argument(
        "--model",
        metavar="ORG/NAME",
        help="read the model's config.json from the local Hugging Face cache (no network)",
    )
    p.add_argument("--revision", default="main", help="branch, tag or commit (default: main)")
    p.add_argument(
        "--mtp",
        action="store_true",
        help="also train DeepSeek-V3's multi-token-prediction modules",
    )


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``estimate``, ``new``, ``validate`` and ``models``."""
    p = sub.add_parser("estimate", help="estimate a plan's memory per rank")
    plan_args(p)
    p.add_argument("--json", action="store_true", help="emit the documented JSON object")
    p.add_argument("--units", choices=["gb", "gib", "both"], default="both")
    p.add_argument("--stages", action="store_true", help="show every pipeline stage")
    p.add_argument("--phases", action="store_true", help="show HBM per step phase")
    p.add_argument("--formulas", action="store_true", help="show each row's formula and source")
    p.add_argument(
        "--reference",
        choices=["deepspeed"],
        help="also show another tool's estimate for comparison",
    )
    p.add_argument("--no-counts", action="store_true", help="skip the three GPU counts")
    search_budget_arg(p)
    p.set_defaults(handler=cmd_estimate)

    p = sub.add_parser("new", help="write a new .memplan file")
    p.add_argument("-o", "--output", required=True, metavar="FILE")
    p.add_argument("--name", help="plan name (default: the file name)")
    p.add_argument("--force", action="store_true", help="overwrite an existing file")
    p.add_argument("--preset", metavar="NAME", help="use this model preset")
    _model_args(p)
    p.add_argument("--set", metavar="SECTION.FIELD=VALUE", action="append", default=[])
    p.set_defaults(handler=cmd_new, plan=None)

    p = sub.add_parser("validate", help="check a .memplan file")
    p.add_argument("plan", metavar="FILE")
    p.set_defaults(handler=cmd_validate)

    p = sub.add_parser("models", help="list the model presets with their parameter counts")
    _model_args(p)
    p.set_defaults(handler=cmd_models)
