"""``memplan trace``: the plan's training step measured on fake tensors, beside the ledger.

Progress goes to stderr with elapsed seconds; the comparison (or ``--json``) to
stdout, with the allocator replay's peak reserved and fragmentation beside the tracker's
allocated peak and the ledger's reserved range (``engine/trace/reserved.py``). ``-o``
writes the trace as a measured record, ``--save`` stores it in the plan
file's measurements (``validate-run`` then compares it like a GPU run, marked
*simulated (trace)*). Exit codes: 0 traced, 1 refused or failed (one reason), 2 usage,
130 interrupted (Ctrl-C stops cleanly, without a traceback). The trace extra is
imported only here, when the command runs, so the app starts without it.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from engine.cli.common import EXIT_OK, EXIT_USAGE, CliError, load_plan, plan_args
from engine.errors import PlanError
from engine.estimate import estimate
from engine.planfile import save
from engine.trace.compare import compare
from engine.trace.errors import TraceError
from engine.trace.extra import require_trace_extra
from engine.trace.progress import format_line
from engine.trace.record import stored_replay, trace_record
from engine.trace.text import render
from engine.validation.store import attach

EXIT_INTERRUPTED = 130


def _progress(started: float) -> Any:
    def say(message: str) -> None:
        print(format_line(time.perf_counter() - started, message), file=sys.stderr, flush=True)

    return say


def _hf_config(path: str | None) -> dict[str, Any] | None:
    if path is None:
        return None
    try:
        doc = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise CliError(f"{path}: cannot read config.json: {exc}") from exc
    if not isinstance(doc, dict):
        raise CliError(f"{path}: config.json must hold a JSON object")
    return doc


def cmd_trace(args: argparse.Namespace) -> int:
    plan, pf = load_plan(args)
    if args.save and pf is None:
        raise CliError("--save needs a PLAN file to store the trace in", EXIT_USAGE)
    try:
        est = estimate(plan)
    except PlanError as exc:
        raise CliError(f"plan cannot be computed: {exc}") from exc
    try:
        require_trace_extra()
        from engine.trace.runner import TraceOptions, trace_plan  # torch: only when tracing

        options = TraceOptions(
            steps=args.steps, rank=args.rank, hf_config=_hf_config(args.hf_config)
        )
        result = trace_plan(plan, options, _progress(time.perf_counter()))
    except TraceError as exc:
        raise CliError(str(exc)) from exc
    except KeyboardInterrupt:
        print("memplan: trace interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    record = trace_record(plan, result, pf.name if pf is not None else "")
    replayed = stored_replay(record)
    reserved = est.heaviest.reserved_peak
    if args.json:
        doc = {**result.to_json(), "replay": record.extra.get("replay")}
        doc["ledger_reserved"] = [reserved.low, reserved.high]
        print(json.dumps({**doc, "record": record.to_json()}, indent=2))
    else:
        ledger = (reserved.low, reserved.high)
        print(render(result, compare(result, est), args.units, replayed, ledger))
    if args.output:
        out = Path(args.output)
        try:
            out.write_text(json.dumps(record.to_json(), indent=2) + "\n", encoding="utf-8")
        except OSError as exc:
            raise CliError(f"cannot write {out}: {exc.strerror or exc}") from exc
        print(f"wrote the trace record to {out}", file=sys.stderr)
    if args.save and pf is not None:
        updated, _ = attach(pf, [record])
        try:
            save(updated, args.plan)
        except OSError as exc:
            raise CliError(f"cannot write {args.plan}: {exc.strerror or exc}") from exc
        print(
            f"stored the trace in {args.plan} ({len(updated.measurements)} records)",
            file=sys.stderr,
        )
    return EXIT_OK


def _steps(text: str) -> int:
    value = int(text)
    if value < 2:
        raise argparse.ArgumentTypeError("at least 2: the first step creates the optimizer state")
    return value


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``trace`` to a front end's parser."""
    p = sub.add_parser("trace", help="measure the plan's training step on fake tensors (no GPU)")
    plan_args(p)
    p.add_argument("--steps", type=_steps, default=2, help="steps to run; the last is reported")
    p.add_argument("--rank", type=int, default=None, help="rank to measure (default: heaviest)")
    p.add_argument("--json", action="store_true", help="emit the trace and its record as JSON")
    p.add_argument("-o", "--output", metavar="RECORD", help="write the trace record to this file")
    p.add_argument("--save", action="store_true", help="store the trace record in PLAN")
    p.add_argument(
        "--hf-config", metavar="CONFIG_JSON", help="build from this config.json, not the plan's"
    )
    p.add_argument("--units", choices=["gb", "gib", "both"], default="both")
    p.set_defaults(handler=cmd_trace)
