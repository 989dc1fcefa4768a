"""Mutated files through load → estimate → save → load, and random plans through every
view. The contract: nothing escapes but PlanFileError / PlanError, each with a message of
at most 300 characters; a file that loaded saves, and reloads as the same plan."""

from __future__ import annotations

import random
from pathlib import Path

from engine import planfile
from engine.errors import PlanError, PlanFileError
from engine.estimate import estimate
from engine.exports import EXPORTERS
from engine.fileio import strict_json
from engine.layout.counts import gpu_counts
from engine.plan import Plan
from engine.whatif.diagnostics import diagnose
from engine.whatif.fit import largest_micro_batch, longest_sequence
from engine.whatif.sensitivity import sensitivity
from tests.fuzz.corpus import seed_files
from tests.fuzz.memplan_cli import run_memplan
from tests.fuzz.mutate import mutate
from tests.fuzz.tally import Tally

VIEW_MAX_GPUS = 16
"""The GPU-count search bound for fuzzed plans (the views, not the search, are tested)."""


def _round_trip(pf: planfile.PlanFile, folder: Path, case: str, tally: Tally) -> None:
    path = folder / "case.memplan"
    planfile.save(pf, path)
    back = planfile.load(path)
    if (back.plan, back.name, back.notes, back.measurements) != (
        pf.plan,
        pf.name,
        pf.notes,
        pf.measurements,
    ):
        tally.lose(case, "the saved file reloads as a different plan")
    debris = [p.name for p in folder.iterdir() if p.name.startswith(".~memplan-")]
    if debris:
        tally.lose(case, f"temp files left behind: {debris}")


def file_case(data: bytes, folder: Path, case: str, tally: Tally, via_disk: bool) -> None:
    """One mutated file; outcomes are refused / cannot-compute / round-tripped."""
    try:
        if via_disk:
            (folder / "in.memplan").write_bytes(data)
            pf = planfile.load(folder / "in.memplan")
        else:
            pf = planfile.parse(strict_json.decode(data, "in.memplan"))
    except PlanFileError as exc:
        tally.message(str(exc), "refused")
        for problem in exc.problems:
            tally.message(problem, "refused (further problem)")
        return
    try:
        estimate(pf.plan)
        tally.outcomes["estimated"] += 1
    except PlanError as exc:
        tally.message(str(exc), "cannot be computed")
    _round_trip(pf, folder, case, tally)


def run_files(count: int, seed: int, folder: Path) -> Tally:
    """``count`` mutated files from the seeds (one in ten read from disk)."""
    tally = Tally("files")
    rng = random.Random(seed)
    seeds = seed_files()
    folder.mkdir(parents=True, exist_ok=True)
    for i in range(count):
        text, plan = rng.choice(seeds)
        data = mutate(rng, text, plan)
        case = f"files seed={seed} case={i}"
        with tally.case(case):
            try:
                file_case(data, folder, case, tally, via_disk=i % 10 == 0)
            except Exception as exc:
                (folder / f"crash-{i}.memplan").write_bytes(data[:1_000_000])
                tally.crash(case, exc)
    return tally


def _view(tally: Tally, name: str, call: object) -> None:
    try:
        call()  # type: ignore[operator]
        tally.outcomes[name] += 1
    except PlanError as exc:
        tally.message(str(exc), f"{name}: cannot be computed")


def plan_views(plan: Plan, case: str, tally: Tally) -> None:
    """Every engine view of one plan; a plan the estimate refuses stops there."""
    with tally.case(case):
        try:
            estimate(plan)
        except PlanError as exc:
            tally.message(str(exc), "estimate: cannot be computed")
            return
        except Exception as exc:
            tally.crash(f"{case} estimate", exc)
            return
        views = {
            "counts": lambda: gpu_counts(plan, max_gpus=VIEW_MAX_GPUS),
            "diagnostics": lambda: diagnose(plan),
            "sensitivity": lambda: sensitivity(plan),
            "fit": lambda: (largest_micro_batch(plan), longest_sequence(plan)),
            **{f"export {k}": (lambda f=f: f(plan)) for k, f in EXPORTERS.items()},
        }
        for name, call in views.items():
            try:
                _view(tally, name, call)
            except Exception as exc:
                tally.crash(f"{case} {name}", exc)


def cli_views(plan: Plan, folder: Path, case: str, tally: Tally) -> None:
    """The terminal's text and JSON forms of a plan, through ``memplan estimate``."""
    path = folder / "view.memplan"
    planfile.save(planfile.PlanFile(plan=plan, name=case), path)
    for argv in (
        ["estimate", str(path), "--json", "--stages", "--reference", "deepspeed", "--no-counts"],
        ["estimate", str(path), "--phases", "--formulas", "--stages", "--no-counts"],
    ):
        try:
            code, err = run_memplan(argv)
        except Exception as exc:
            tally.crash(f"{case} {' '.join(argv[2:])}", exc)
            continue
        if code not in (0, 1) or "Traceback" in err:
            tally.crash(case, RuntimeError(f"exit {code}: {err[-400:]}"))
        tally.outcomes[f"cli exit {code}"] += 1
