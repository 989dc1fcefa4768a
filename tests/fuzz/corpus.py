"""The seeds every fuzzer starts from: the 25 golden plans (varied models, strategies and
layouts), one with measured records attached, and a schema-0 file that migrates."""

from __future__ import annotations

from functools import cache
from pathlib import Path

from engine.cli import build_parser
from engine.cli.common import load_plan
from engine.plan import Plan
from engine.planfile import PlanFile, PlanFileError, dumps, parse
from engine.units import GiB
from engine.validation.identity import workload_hash
from engine.validation.records import MeasuredRecord
from engine.validation.store import attach
from tests.golden.cases import CASES

DATA = Path(__file__).resolve().parent.parent / "data"


@cache
def seed_plans() -> dict[str, Plan]:
    """The golden cases as plans (built the way ``memplan estimate ARGS`` builds them)."""
    parser = build_parser()
    return {n: load_plan(parser.parse_args(["estimate", *a]))[0] for n, a in CASES.items()}


def with_records(name: str, plan: Plan) -> PlanFile:
    """A plan file carrying two measured records (what ``validate-run`` stores)."""
    base = {
        "config_hash": plan.config_hash(),
        "workload_hash": workload_hash(plan),
        "world_size": plan.parallelism.world_size,
        "label": "fuzz",
        "max_allocated_bytes": 20 * GiB,
        "max_reserved_bytes": 22 * GiB,
    }
    records = [MeasuredRecord.model_validate({**base, "rank": r}) for r in (0, 1)]
    return attach(PlanFile(plan=plan, name=name, notes="seed with records"), records)[0]


@cache
def seed_texts() -> tuple[str, ...]:
    """File texts: every golden plan, one with records, the schema-0 fixture."""
    plans = seed_plans()
    files = [PlanFile(plan=p, name=n, notes=f"golden case {n}") for n, p in plans.items()]
    files.append(with_records("records", plans["default"]))
    texts = [dumps(pf) for pf in files]
    texts.append((DATA / "plan_v0.memplan").read_text(encoding="utf-8"))
    return tuple(texts)


@cache
def seed_files() -> tuple[tuple[str, Plan | None], ...]:
    """Each seed text with its plan (None for the schema-0 file's own mutations)."""
    out = []
    for text in seed_texts():
        try:
            out.append((text, parse(text).plan))
        except PlanFileError:
            out.append((text, None))
    return tuple(out)
