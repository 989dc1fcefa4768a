"""Mutated import files of every kind through ``import_file`` → save → reopen.

The contract (issue 33): nothing escapes ``import_file`` but :class:`ImportRefused`, whose
message is one sentence of at most 300 characters and never the wrapper of an internal
error; no case runs 10 s (each runs under a ``SIGALRM`` deadline, so a blocking read
or a runaway loop is cut off and counted, not waited for); every resolution and warning
is one line of at most 300 characters; and every accepted import saves and reopens as
the same plan.
"""

from __future__ import annotations

import os
import random
import shutil
import signal
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType

from engine import planfile
from engine.exports.import_guard import INTERNAL, ImportRefused
from engine.exports.importers import import_file
from engine.plan import Plan
from engine.presets import default_plan
from tests.fuzz.import_mutate import mutate_header, mutate_json, mutate_text
from tests.fuzz.import_seeds import (
    KINDS,
    Folder,
    folder_seeds,
    framework_seeds,
    hf_seeds,
    write_shard,
)
from tests.fuzz.tally import Tally

DEADLINE_S = 10.0
"""A case still running after this long is a hang (the issue's bound)."""

ODD_FILE = 0.04
"""The share of cases whose file is swapped for a FIFO, a folder or a link to a device."""


class _Hang(BaseException):
    """Raised by the deadline's alarm; a BaseException, so no ``except Exception`` in
    the code under test can swallow it."""


@contextmanager
def deadline(seconds: float) -> Iterator[None]:
    """Interrupt the block after ``seconds`` (main thread only: SIGALRM)."""

    def on_alarm(_signum: int, _frame: FrameType | None) -> None:
        raise _Hang

    old = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def _odd_file(rng: random.Random, path: Path) -> None:
    """Replace ``path`` with something that is not a regular file."""
    path.unlink(missing_ok=True)
    choice = rng.randrange(4)
    if choice == 0:
        os.mkfifo(path)
    elif choice == 1:
        path.mkdir()
    elif choice == 2:
        path.symlink_to("/dev/zero")
    else:
        path.symlink_to("../../../../../../../../../../etc/hostname")


def _folder_case(rng: random.Random, seed: Folder, case: Path) -> None:
    victim = rng.choice([*seed.files, *seed.shards])
    for name, text in seed.files.items():
        data = mutate_json(rng, text) if name == victim else text.encode()
        (case / name).write_bytes(data)
    for name, (header, data_len) in seed.shards.items():
        raw, length = mutate_header(rng, header) if name == victim else (header.encode(), None)
        write_shard(case / name, raw, data_len, length)
    if rng.random() < ODD_FILE:
        _odd_file(rng, case / victim)


def make_case(rng: random.Random, kind: str, case: Path) -> tuple[Path, str | None]:
    """Write one mutated file (or folder) of ``kind`` into the empty folder ``case``;
    (what to import, the kind to name or None to let MemPlan detect it)."""
    named = rng.random() < 0.3
    if kind == "model_folder":
        _folder_case(rng, rng.choice(folder_seeds()), case)
        return case, "hf" if named else None
    if kind == "hf_config":
        name, text = rng.choice(hf_seeds())
        target = case / "config.json"
        target.write_bytes(mutate_json(rng, text))
        return target, "hf" if named else None
    name, text, extras = rng.choice(framework_seeds()[kind])
    for extra, extra_text in extras:
        (case / extra).write_text(extra_text, encoding="utf-8")
    target = case / name
    mutate = mutate_json if name.endswith(".json") else mutate_text
    target.write_bytes(mutate(rng, text))
    if rng.random() < ODD_FILE:
        _odd_file(rng, target)
    return target, kind if named else None


def import_case(path: Path, kind: str | None, base: Plan, out: Path, label: str, t: Tally) -> None:
    """One import: refused in one sentence, or a plan that saves and reopens."""
    with t.case(label):
        try:
            with deadline(DEADLINE_S):
                got = import_file(path, base, kind)
        except _Hang:
            t.hangs += 1
            t.crash(label, TimeoutError(f"still running after {DEADLINE_S:.0f} s"))
            return
        except ImportRefused as exc:
            t.message(str(exc), "refused")
            if INTERNAL in str(exc):
                t.crash(label, exc.__cause__ or exc)
            return
        except Exception as exc:
            t.crash(label, exc)
            return
        t.outcomes["imported"] += 1
        for line in (*got.resolutions, *got.warnings):
            t.message(line, "notes")
            if "\n" in line or "\r" in line:
                t.crash(label, ValueError(f"a note spans lines: {line!r:.120}"))
        pf = planfile.PlanFile(plan=got.plan, name=label)
        planfile.save(pf, out)
        if planfile.load(out).plan != got.plan:
            t.lose(label, "the imported plan reopens as a different plan")


def run_imports(per_kind: int, seed: int, folder: Path, kinds: tuple[str, ...] = KINDS) -> Tally:
    """``per_kind`` mutated files of each kind; the tally of all of them."""
    tally = Tally("import files")
    folder.mkdir(parents=True, exist_ok=True)
    base = default_plan()
    out = folder / "imported.memplan"
    for kind in kinds:
        rng = random.Random(f"{seed}-{kind}")
        for i in range(per_kind):
            case = folder / "case"
            if case.is_symlink() or case.is_file():
                case.unlink()
            shutil.rmtree(case, ignore_errors=True)
            case.mkdir()
            label = f"{kind} {seed}/{i}"
            try:
                path, named = make_case(rng, kind, case)
            except OSError as exc:  # the fuzzer's own file, not MemPlan: skip it
                tally.outcomes["unwritable case"] += 1
                del exc
                continue
            import_case(path, named, base, out, label, tally)
    return tally


def kind_tallies(per_kind: int, seed: int, folder: Path) -> list[Tally]:
    """One tally per kind (the long run prints each)."""
    out = []
    for kind in KINDS:
        tally = run_imports(per_kind, seed, folder / kind, (kind,))
        tally.name = f"import {kind}"
        out.append(tally)
    return out
