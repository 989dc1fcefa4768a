"""``memplan export -o`` never replaces a file silently, and no save replaces what is not
a regular file (issue 33).

Before: ``export -o`` overwrote the target and the ``peft_config.py`` / ``ds_config.json``
beside it without a word (``memplan new`` refused without ``--force``), and a save onto a
FIFO or a device node (or a symlink to one) replaced it with a regular file — or, written
in place, blocked on the FIFO.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from engine.cli import main
from engine.errors import SaveError
from engine.fileio.atomic import refuse_special, write_atomic
from engine.plan import default_plan
from engine.planfile import PlanFile, save

LORA = ["--set", "method.kind=lora"]


def _export(out: Path, *extra: str) -> int:
    return main(["export", "--format", "megatron", "-o", str(out), *LORA, *extra])


def test_export_refuses_an_existing_target_without_force(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "train.sh"
    out.write_text("mine\n", encoding="utf-8")
    assert _export(out) != 0
    err = capsys.readouterr().err
    assert f"{out} already exists; pass --force to overwrite" in err
    assert out.read_text(encoding="utf-8") == "mine\n"
    assert not (tmp_path / "peft_config.py").exists()  # nothing half-written


def test_export_names_an_existing_companion_too(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Only the PEFT snippet beside the target exists: refused, and named."""
    snippet = tmp_path / "peft_config.py"
    snippet.write_text("mine\n", encoding="utf-8")
    assert _export(tmp_path / "train.sh") != 0
    err = capsys.readouterr().err
    assert f"{snippet} already exists; pass --force" in err
    assert snippet.read_text(encoding="utf-8") == "mine\n"
    assert not (tmp_path / "train.sh").exists()


def test_export_names_every_existing_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out, ds = tmp_path / "acc.yaml", tmp_path / "ds_config.json"
    for p in (out, ds):
        p.write_text("mine\n", encoding="utf-8")
    args = ["export", "--format", "accelerate", "-o", str(out)]
    args += ["--set", "stack.name=hf_trainer", "--set", "parallelism.strategy=zero3"]
    assert main(args) != 0
    assert f"{out}, {ds} already exist; pass --force" in capsys.readouterr().err
    assert main([*args, "--force"]) == 0
    assert out.read_text(encoding="utf-8").startswith("# accelerate config")
    assert '"zero_optimization"' in ds.read_text(encoding="utf-8")


def test_force_overwrites_both(tmp_path: Path) -> None:
    out, snippet = tmp_path / "train.sh", tmp_path / "peft_config.py"
    for p in (out, snippet):
        p.write_text("mine\n", encoding="utf-8")
    assert _export(out, "--force") == 0
    assert out.read_text(encoding="utf-8").startswith("#!/bin/bash\n")
    assert "LoraConfig(" in snippet.read_text(encoding="utf-8")


def _fifo(tmp_path: Path) -> Path:
    if not hasattr(os, "mkfifo"):  # pragma: no cover - POSIX only
        pytest.skip("no FIFOs on this system")
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    return fifo


@pytest.mark.parametrize("via_symlink", [False, True])
def test_no_save_replaces_a_fifo(tmp_path: Path, via_symlink: bool) -> None:
    """Neither a plan save, an export (even with --force) nor the report's check
    replaces a FIFO or writes into it (which would block): one sentence says why."""
    fifo = _fifo(tmp_path)
    target = fifo
    if via_symlink:
        target = tmp_path / "link.memplan"
        target.symlink_to(fifo)
    with pytest.raises(SaveError, match="is a FIFO .named pipe.; MemPlan saves only over"):
        save(PlanFile(plan=default_plan(), name="x"), target)
    with pytest.raises(SaveError, match="FIFO"):
        refuse_special(target)
    assert main(["export", "--format", "deepspeed", "-o", str(target), "--force"]) != 0
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)


def test_no_save_replaces_a_device_node() -> None:
    """/dev/null is a character device: refused before anything is written."""
    if not os.path.exists("/dev/null"):  # pragma: no cover - POSIX only
        pytest.skip("no /dev/null")
    with pytest.raises(SaveError, match="/dev/null is a character device"):
        write_atomic(b"x", "/dev/null")
    with pytest.raises(SaveError, match="character device"):
        refuse_special("/dev/null")


def test_regular_files_and_new_names_still_save(tmp_path: Path) -> None:
    refuse_special(tmp_path / "new.pdf")  # absent: fine
    path = tmp_path / "p.memplan"
    save(PlanFile(plan=default_plan(), name="x"), path)
    save(PlanFile(plan=default_plan(), name="y"), path)  # over a regular file
    refuse_special(path)
    assert '"y"' in path.read_text(encoding="utf-8")
