"""The allocator replay of the shared measured cases against the ledger's reserved range.

``tests/data/reserved-replay.json`` holds, per case of ``shared/reference/measured``, the
traced allocated peak, the replay's peak reserved and fragmentation under the plan's
allocator settings and under the other ``expandable_segments`` setting, made by
``tests/reserved_replay.py`` (a trace per case: too slow for a test; see
``docs/reserved-replay.md``). The ledger's ranges are computed here, now, so a change to
the reserve model is judged against the replay.

The rule — where the replay is the better witness of reserved memory: when the trace
reproduced the measured case's allocated peak to the byte (the replayed requests are
those of the measured step) **and** the ledger's allocated range holds that peak (the
ledger and the trace agree on what is live, so a disagreement on reserved is the
reserve model's alone). For those cases the ledger's reserved range must hold the
replay's peak reserved, or the case is a recorded gap (``gaps`` in the JSON, the bytes
by which the replay lay outside when recorded): a new gap fails, a recorded one is
reported in the doc until the reserve model closes it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from engine.estimate import estimate
from engine.trace.compare import unseen
from tests.measured_cases import plan_for_case
from tests.reserved_replay import DATA, cases

DOC: dict[str, Any] = json.loads(DATA.read_text(encoding="utf-8"))
ENTRIES = {e["name"]: e for e in DOC["cases"]}


def test_every_measured_case_has_a_replay() -> None:
    names = [c.name for c in cases()]
    assert sorted(ENTRIES) == sorted(names)


@pytest.mark.parametrize("name", sorted(ENTRIES))
def test_the_recorded_replay_is_self_consistent(name: str) -> None:
    """The trace reproduced the measured peak; reserved ≥ allocated ≥ requested (the
    allocator books whole blocks: 512-B rounding and unsplit remainders ≤ 1 MiB); the
    fragmentation is reserved − allocated at the reserved peak, so under reserved."""
    e = ENTRIES[name]
    assert e["traced_peak_allocated"] == e["measured_peak_allocated"]
    for key in ("replay", "replay_other_expandable"):
        r = e[key]
        assert r["peak_reserved"] >= r["peak_allocated"] >= r["peak_requested"] > 0
        assert 0 <= r["unreleasable"] <= r["fragmentation"] < r["peak_reserved"]
    assert e["replay"]["expandable_segments"] != e["replay_other_expandable"]["expandable_segments"]
    fsdp = "fsdp" in name
    assert (e["replay"]["streams"] == [0, 1, 2]) is fsdp  # FSDP2's side streams, only there


def _witness(name: str) -> tuple[bool, int, tuple[int, int]]:
    """(is the replay the better witness, its peak reserved, the ledger's reserved range)."""
    case = next(c for c in cases() if c.name == name)
    est = estimate(plan_for_case(case))
    e = ENTRIES[name]
    alloc, res = est.peak, est.heaviest.reserved_peak
    ws = unseen(est.heaviest)  # the cuBLAS workspaces: the trace and its replay make none
    traced = e["traced_peak_allocated"]
    inside = alloc.low - ws[0] <= traced <= alloc.high - ws[1]
    witness = traced == e["measured_peak_allocated"] and inside
    return witness, e["replay"]["peak_reserved"], (res.low - ws[0], res.high - ws[1])


@pytest.mark.parametrize("name", sorted(ENTRIES))
def test_the_ledger_s_reserved_range_holds_the_replay_or_the_gap_is_recorded(name: str) -> None:
    witness, reserved, (low, high) = _witness(name)
    if not witness:
        pytest.skip("the ledger's allocated range misses the traced peak: not a witness")
    gaps: dict[str, int] = DOC.get("gaps", {})
    if not low <= reserved <= high:
        assert name in gaps, (
            f"replay reserved {reserved:,} B outside the ledger's {low:,}–{high:,} B "
            "and not a recorded gap"
        )


def test_the_data_file_is_small() -> None:
    """Figures only: the event lists stay out of the repository (megabytes a case)."""
    assert Path(DATA).stat().st_size < 64_000
