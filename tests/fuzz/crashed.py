"""The files a crashed app instance leaves in the autosave folder, made on purpose."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from engine import planfile
from engine.plan import Plan, default_plan, with_value
from engine.planfile import PlanFile
from gui.files.instance import lock_path


def crashed_autosave(
    folder: Path, plan: Plan, pid: int, instance: str = "dead01", window: int = 1, **meta: Any
) -> Path:
    """An autosave, its sidecar and a lock file nobody holds, as a killed instance with
    process id ``pid`` (one that has exited, or a reused one) leaves them."""
    folder.mkdir(parents=True, exist_ok=True)
    stem = f"autosave-{instance}-{pid}-w{window}"
    path = folder / f"{stem}.memplan"
    planfile.save(PlanFile(plan=plan, name=f"plan {plan.batch.seq_len}"), path)
    sidecar = {"instance": instance, "pid": pid, "saved_at": "2025-01-01T10:00:00", **meta}
    (folder / f"{stem}.json").write_text(json.dumps(sidecar), encoding="utf-8")
    lock_path(folder, instance).write_text(json.dumps({"pid": pid}), encoding="utf-8")
    return path


def plan_with(seq_len: int) -> Plan:
    """The default plan with another sequence length: plans told apart by one number."""
    return with_value(default_plan(), "batch.seq_len", seq_len)


def hashes_on_disk(folder: Path) -> set[str]:
    """The config hashes of every autosave in ``folder``."""
    return {planfile.load(p).config_hash for p in folder.glob("autosave-*.memplan")}
