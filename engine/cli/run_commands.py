"""Subcommands for measured runs: ``probe``, ``validate-run`` and ``calibrate``.

``probe`` writes the measurement snippet with the plan's hashes baked in;
``validate-run`` reads records (files, folders, JSON lines), stores them in the plan
file and prints estimate vs measured per rank; ``calibrate`` prints the proposed edits
of the uncertain ranges with before and after, and writes them to a new file — the
input plan is never changed behind the user's back.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path
from typing import Any

from engine.cli.common import EXIT_OK, CliError, apply_sets, load_plan, plan_args
from engine.errors import PlanError
from engine.estimate import estimate
from engine.planfile import PlanFile, PlanFileError, load, save
from engine.validation.calibrate import DEFAULT_MARGIN, Calibration, propose
from engine.validation.identity import workload_hash
from engine.validation.probe import probe_source
from engine.validation.reconcile import reconcile
from engine.validation.records import MeasuredRecord, RecordError, load_records
from engine.validation.report import reconciliation_json, render
from engine.validation.store import attach, records_of


def _load_file(path: str) -> PlanFile:
    try:
        pf = load(path)
    except PlanFileError as exc:
        raise CliError(f"{path}: {exc}") from exc
    for msg in pf.extra_messages:
        print(f"memplan: note: {msg}", file=sys.stderr)
    return pf


def _read_records(paths: list[str]) -> list[MeasuredRecord]:
    out: list[MeasuredRecord] = []
    for path in paths:
        try:
            out += load_records(path)
        except RecordError as exc:
            raise CliError(str(exc)) from exc
    return out


def _stored(pf: PlanFile, path: str) -> list[MeasuredRecord]:
    try:
        return records_of(pf)
    except RecordError as exc:
        raise CliError(f"{path}: {exc}") from exc


def _write(pf: PlanFile, out: Path) -> None:
    try:
        save(pf, out)
    except OSError as exc:
        raise CliError(f"cannot write {out}: {exc.strerror or exc}") from exc


def cmd_probe(args: argparse.Namespace) -> int:
    plan, pf = load_plan(args)
    out = Path(args.output)
    if out.exists() and not args.force:
        raise CliError(f"{out} exists; pass --force to overwrite it")
    name = pf.name if pf is not None else ""
    try:
        out.write_text(probe_source(plan.config_hash(), workload_hash(plan), name), "utf-8")
    except OSError as exc:
        raise CliError(f"cannot write {out}: {exc.strerror or exc}") from exc
    print(f"wrote {out} (plan config {plan.config_hash()[:12]})")
    print(
        f"  in the training script: from {out.stem} import MemPlanProbe; "
        f"probe = MemPlanProbe(warmup_steps=2, window_steps=3, out_dir='memplan_records'); "
        f"call probe.step() after every optimizer step"
    )
    print("  then: memplan validate-run PLAN.memplan memplan_records/")
    return EXIT_OK


def cmd_validate_run(args: argparse.Namespace) -> int:
    pf = _load_file(args.plan)
    new = _read_records(args.records)
    records = new or _stored(pf, args.plan)
    if not records:
        raise CliError(f"{args.plan}: no records given and none stored in the plan")
    try:
        est = estimate(pf.plan)
    except PlanError as exc:
        raise CliError(f"plan cannot be computed: {exc}") from exc
    result = reconcile(est, records, workload_hash(pf.plan))
    if args.json:  # the text table shows warnings first; JSON readers see them on stderr
        for warning in result.warnings:
            print(f"memplan: WARNING: {warning}", file=sys.stderr)
        print(json.dumps(reconciliation_json(result), indent=2))
    else:
        print(render(result, args.units))
    if new and not args.no_save:
        target = Path(args.output) if args.output else Path(args.plan)
        updated, added = attach(pf, new)
        if added or target != Path(args.plan):
            _write(updated, target)
        total = len(updated.measurements)
        print(f"stored {added} new record(s) in {target} ({total} in all)", file=sys.stderr)
    return EXIT_OK


def _show(value: Any) -> str:
    return json.dumps(value, sort_keys=True)


def print_calibration(cal: Calibration) -> None:
    """Each proposed edit with before → after and its evidence, then how to undo it."""
    for warning in cal.warnings:
        print(f"memplan: WARNING: {warning}", file=sys.stderr)
    for note in cal.notes:
        print(f"note: {note}")
    if not cal.proposals:
        print("no changes proposed: the measured figures leave every range as it is")
        return
    for p in cal.proposals:
        print(f"{p.path}: {_show(p.before)} → {_show(p.after)}")
        print(f"    {p.evidence}")


def cmd_calibrate(args: argparse.Namespace) -> int:
    pf = _load_file(args.plan)
    new = _read_records(args.records)
    records = new or _stored(pf, args.plan)
    if not records:
        raise CliError(f"{args.plan}: no records given and none stored in the plan")
    out = Path(args.output)
    if out.exists() and not args.force:
        raise CliError(f"{out} exists; pass --force to overwrite it")
    try:
        cal = propose(pf.plan, records, margin=args.margin)
    except PlanError as exc:
        raise CliError(f"plan cannot be computed: {exc}") from exc
    except ValueError as exc:
        raise CliError(str(exc)) from exc
    print_calibration(cal)
    plan = apply_sets(pf.plan, [f"{k}={_show(v)}" for k, v in cal.changes.items()])
    updated, _ = attach(dataclasses.replace(pf, plan=plan), new)
    _write(updated, out)
    print(f"wrote {out} (config {plan.config_hash()[:12]}); {args.plan} is unchanged")
    for line in _peak_changes(estimate(pf.plan), estimate(plan)):
        print(f"  {line}")
    return EXIT_OK


def _peak_changes(before: Any, after: Any) -> list[str]:
    """The heaviest stage's peaks before → after (those this engine version has)."""
    lines = []
    for name in ("peak", "reserved_peak", "device_peak"):
        old, new = getattr(before.heaviest, name, None), getattr(after.heaviest, name, None)
        if old is not None and new is not None:
            lines.append(f"{name}: {old.low:,}–{old.high:,} B → {new.low:,}–{new.high:,} B")
    return lines


def _units(p: argparse.ArgumentParser) -> None:
    p.add_argument("--units", choices=["gb", "gib", "both"], default="both")


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``probe``, ``validate-run`` and ``calibrate`` to a front end's parser."""
    p = sub.add_parser("probe", help="write the measurement snippet for a training script")
    plan_args(p)
    p.add_argument("-o", "--output", default="memplan_probe.py", metavar="FILE")
    p.add_argument("--force", action="store_true", help="overwrite an existing file")
    p.set_defaults(handler=cmd_probe)

    p = sub.add_parser("validate-run", help="compare measured records with a plan's estimate")
    p.add_argument("plan", metavar="PLAN", help="a .memplan file")
    p.add_argument(
        "records",
        metavar="RECORD",
        nargs="*",
        help="record files, folders of them or JSON lines (default: those stored in PLAN)",
    )
    p.add_argument("--json", action="store_true", help="emit the reconciliation as JSON")
    p.add_argument("--no-save", action="store_true", help="compare only; do not store records")
    p.add_argument("-o", "--output", metavar="FILE", help="store into FILE instead of PLAN")
    _units(p)
    p.set_defaults(handler=cmd_validate_run)

    p = sub.add_parser("calibrate", help="propose narrower ranges from measured records")
    p.add_argument("plan", metavar="PLAN", help="a .memplan file")
    p.add_argument("records", metavar="RECORD", nargs="*", help="default: those stored in PLAN")
    p.add_argument("-o", "--output", required=True, metavar="OUT", help="the calibrated plan")
    p.add_argument(
        "--margin",
        type=float,
        default=DEFAULT_MARGIN,
        help=f"widen the measured spread by this fraction each side (default {DEFAULT_MARGIN})",
    )
    p.add_argument("--force", action="store_true", help="overwrite an existing OUT")
    p.set_defaults(handler=cmd_calibrate)
