"""The command line on bad arguments and bad files: a one-line message, exit 1 (bad plan
or file) or 2 (wrong usage), never a traceback — and the good cases still exit 0.

Commands run in-process (see ``memplan_cli``).
"""

from __future__ import annotations

import os
import random
from pathlib import Path

from engine import planfile
from engine.plan import default_plan
from tests.fuzz.corpus import seed_files, seed_plans
from tests.fuzz.memplan_cli import run_memplan
from tests.fuzz.mutate import mutate
from tests.fuzz.tally import Tally
from tests.golden.cases import NO_SEARCH

USAGE_ERRORS: tuple[tuple[str, ...], ...] = (
    ("layouts", "--gpus", "-1"),
    ("layouts", "--gpus", "0"),
    ("layouts", "--gpus", "1e9"),
    ("layouts", "--gpus", "9" * 30),
    ("layouts", "--gpus", ""),
    ("layouts", "--gpus", "4", "--max-gpus", "8"),
    ("estimate", "--units", "tb"),
    ("estimate", "--set", "batch"),
    ("estimate", "--set", "=1"),
    ("estimate", "--set", "nodots=1"),
    ("export", "--format", "nope"),
    ("calibrate",),
    ("nonsense-command",),
    ("estimate", "--no-such-option"),
)
"""Each must exit 2 with argparse's or the CLI's one-line usage message."""

BAD_OPTIONS: tuple[tuple[str, ...], ...] = (
    ("--max-gpus", "-5"),  # exit 2 (argument) or 1 (policy.max_gpus), as the CLI decides
    ("--set", "batch.seq_len=-1"),
    ("--set", "batch.seq_len=" + "9" * 5000),
    ("--set", "batch.seq_len=1e999"),
    ("--set", "batch.seq_len=NaN"),
    ("--set", "batch.nofield=1"),
    ("--set", "model.name=x\udcff"),  # an argv byte that is not UTF-8
    ("--set", "parallelism.knobs.fsdp_reshard_after_forward=-3"),
    ("--set", "policy.headroom_percent=" + "1" * 400),
    ("--preset", "no-such-model"),
    ("--preset", "x" * 10_000),
)
"""Each must exit 1 (the plan is refused) — or 0 where the value is valid after all."""

EXTREME_OPTIONS: tuple[tuple[str, ...], ...] = (
    ("--set", "parallelism.dp=1000000"),
    ("--set", "model.architecture.layers=10000"),
    ("--set", "batch.seq_len=10000000"),
)
"""Valid but extreme: run with ``--no-counts`` only (bounding the GPU-count search on
such plans is the search's own budget, not this suite's)."""


def _files(rng: random.Random, folder: Path, count: int) -> list[str]:
    """Bad plan files of every kind: mutated, missing, a folder, empty, a device. The
    golden plans whose GPU-count search takes minutes (``NO_SEARCH``: bounding it is the
    search's own budget) are left out, since ``estimate`` searches."""
    slow = [p for n, p in seed_plans().items() if n in NO_SEARCH]
    seeds = [(text, plan) for text, plan in seed_files() if plan is None or plan not in slow]
    paths = [str(folder / "missing.memplan"), str(folder), "/dev/null"]
    for i in range(count):
        text, plan = rng.choice(seeds)
        path = folder / f"bad-{i}.memplan"
        path.write_bytes(mutate(rng, text, plan))
        paths.append(str(path))
    return paths


def _commands(rng: random.Random, plan: str, out: Path) -> list[str]:
    command = rng.choice(
        [
            ["estimate", plan],
            ["estimate", plan, "--json", "--stages"],
            ["estimate", plan, "--phases", "--formulas", "--no-counts"],
            ["layouts", plan, "--max-gpus", "16"],
            ["export", plan, "--format", rng.choice(["deepspeed", "fsdp2", "megatron"])],
            ["validate", plan],
            ["validate-run", plan, "--no-save"],
            ["calibrate", plan, "-o", str(out / "cal.memplan"), "--force"],
            ["probe", plan, "-o", str(out / "probe.py"), "--force"],
            ["new", "-o", str(out / "new.memplan"), "--force"],
        ]
    )
    if rng.random() < 0.5 and command[0] not in ("validate", "validate-run", "calibrate"):
        option = rng.choice(BAD_OPTIONS)
        command += option if command[0] == "layouts" or option[0] != "--max-gpus" else ()
    elif rng.random() < 0.1:
        command = ["estimate", plan, "--no-counts", *rng.choice(EXTREME_OPTIONS)]
    return command


def _check(argv: list[str], allowed: set[int], case: str, tally: Tally) -> None:
    try:
        code, err = run_memplan(argv)
    except Exception as exc:
        tally.crash(f"{case}: memplan {' '.join(a[:40] for a in argv)}", exc)
        return
    lines = [line for line in err.splitlines() if line.strip()]
    if code not in allowed or "Traceback" in err:
        tally.crash(case, RuntimeError(f"exit {code} for {argv!r:.200}: {err[-600:]}"))
        return
    for line in lines:
        if line.startswith("memplan") and not line.startswith("memplan: note:"):
            tally.message(line, f"exit {code}")
    tally.outcomes[f"exit {code}"] += not lines


def run_cli(count: int, seed: int, folder: Path) -> Tally:
    """Every usage error once, then ``count`` random commands on bad files/options."""
    tally = Tally("cli")
    rng = random.Random(seed)
    folder.mkdir(parents=True, exist_ok=True)
    good = folder / "good.memplan"
    planfile.save(planfile.PlanFile(plan=default_plan(), name="good"), good)
    files = [str(good), *_files(rng, folder, max(4, count // 3))]
    cwd = os.getcwd()
    os.chdir(folder)  # a command that writes a default file name writes it here
    try:
        for i, argv in enumerate(USAGE_ERRORS):
            with tally.case(" ".join(argv)):
                _check(list(argv), {2}, f"cli usage {i}", tally)
        for i in range(count):
            argv = _commands(rng, rng.choice(files), folder)
            with tally.case(" ".join(a[:60] for a in argv)):
                _check(argv, {0, 1, 2}, f"cli seed={seed} case={i}", tally)
    finally:
        os.chdir(cwd)
    return tally
