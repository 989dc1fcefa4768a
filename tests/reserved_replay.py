"""Replay the shared measured cases through the allocator simulator (a script, not a test).

    PYTHONPATH=. timeout 300 .venv/bin/python tests/reserved_replay.py CASE_NAME
    MEMPLAN_CASES=/work/shared/reference/measured/cases.jsonl …  (outside the clone)
    PYTHONPATH=. .venv/bin/python tests/reserved_replay.py --table

With a case name: trace that case (fake tensors, ~35 s on a free core), replay its
allocation events under the plan's allocator settings — and under the other
``expandable_segments`` setting, to show what the setting is worth — and merge one entry
into ``tests/data/reserved-replay.json``. One case per run, so a shell loop can bound
each with ``timeout``. ``--table``: print the Markdown table of
``docs/reserved-replay.md`` from that JSON (with the ledger's ranges as they are now).
``--published ID``: the same for a traceable published (allocated, reserved) row
(:data:`PUBLISHED_PAIRS`), kept under ``published``.

The committed JSON holds figures only, not the event lists (megabytes per case).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from engine.estimate import estimate
from engine.plan import with_values
from engine.trace.reserved import allocator_config, replay_trace
from engine.units import GiB
from tests.measured_cases import CASES_PATH, Case, load_cases, plan_for_case

DATA = Path(__file__).resolve().parent / "data" / "reserved-replay.json"


def cases() -> list[Case]:
    """The shared cases: beside the clone (``CASES_PATH``), or where ``MEMPLAN_CASES``
    points (a worktree that is not beside ``shared/``)."""
    return load_cases(Path(os.environ.get("MEMPLAN_CASES", str(CASES_PATH))))


def ledger_ranges(plan: Any) -> dict[str, list[int]]:
    """The ledger's allocated and reserved peak ranges for the heaviest rank."""
    est = estimate(plan)
    alloc, res = est.peak, est.heaviest.reserved_peak
    return {"ledger_allocated": [alloc.low, alloc.high], "ledger_reserved": [res.low, res.high]}


def run_case(name: str) -> dict[str, Any]:
    from engine.trace.runner import trace_plan  # torch: only when tracing

    case = next(c for c in cases() if c.name == name)
    plan = plan_for_case(case)
    result = trace_plan(plan)
    own = replay_trace(plan, result.alloc_events)
    config = allocator_config(plan)
    other_plan = with_values(plan, {"runtime.expandable_segments": not config.expandable_segments})
    other = replay_trace(other_plan, result.alloc_events)
    return {
        "name": name,
        "measured_peak_allocated": case.peak_bytes,
        "traced_peak_allocated": result.peak_bytes,
        "replay": own.to_json(),
        "replay_other_expandable": other.to_json(),
        **ledger_ranges(plan),
    }


PUBLISHED = Path(__file__).resolve().parent / "data" / "published" / "cases.jsonl"
PUBLISHED_PAIRS: dict[str, tuple[str, ...]] = {
    "answerai-llama2-7b-lora-ctx512-bs1": ("answerai-llama2-7b-lora-ctx512-bs1-alloc",),
    "answerai-llama2-7b-lora-ctx2048-bs1": ("answerai-llama2-7b-lora-ctx2048-bs1-alloc",),
    "torchtitan-8b-fsdp8-sac": (),
}
"""Published reserved rows that can be traced → their published allocated row (if any).
The Answer.AI runs are FSDP1, which no memory tracker covers: traced as FSDP2 over the
same two ranks (the same shards; FSDP1's flat parameter is one all-gather per unit)."""


def run_published(row_id: str) -> dict[str, Any]:
    """Trace a published row's plan (``memplan`` overrides of tests/data/published) and
    replay it; the published reserved (and allocated) figures beside."""
    from engine.trace.runner import trace_plan  # torch: only when tracing
    from tests.engine.allocator.published import plan_of

    rows = {}
    for line in PUBLISHED.read_text(encoding="utf-8").splitlines():
        doc = json.loads(line)
        rows[doc["id"]] = doc
    row = rows[row_id]
    sets = dict(row["memplan"]["set"])
    substituted = sets.get("parallelism.strategy") == "fsdp1_full_shard"
    if substituted:
        sets["parallelism.strategy"] = "fsdp2"
    plan = plan_of(row["memplan"]["preset"], sets)
    result = trace_plan(plan)
    own = replay_trace(plan, result.alloc_events)
    allocated = [rows[a]["measured"]["low_gib"] for a in PUBLISHED_PAIRS[row_id]]
    return {
        "name": row_id,
        "published_reserved_gib": row["measured"]["low_gib"],
        "published_allocated_gib": allocated[0] if allocated else None,
        "traced_as_fsdp2": substituted,
        "traced_peak_allocated": result.peak_bytes,
        "replay": own.to_json(),
        **ledger_ranges(plan),
    }


def merge(entry: dict[str, Any], key: str = "cases") -> None:
    doc = json.loads(DATA.read_text(encoding="utf-8")) if DATA.exists() else {"cases": []}
    kept = [c for c in doc.get(key, []) if c["name"] != entry["name"]] + [entry]
    order = [c.name for c in cases()] if key == "cases" else list(PUBLISHED_PAIRS)
    doc[key] = sorted(kept, key=lambda c: order.index(c["name"]))
    DATA.write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")


def _gib(n: int) -> str:
    return f"{n / GiB:.2f}"


def table() -> str:
    doc = json.loads(DATA.read_text(encoding="utf-8"))
    head = (
        "| case | traced alloc | replay alloc | replay reserved | reserved − alloc | stuck "
        "| segs | streams | reserved, other expandable | ledger alloc | ledger reserved "
        "| replay vs ledger |\n"
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"
    )
    rows = [head]
    by_name = {c.name: c for c in cases()}
    for e in doc["cases"]:
        r, o = e["replay"], e["replay_other_expandable"]
        live = ledger_ranges(plan_for_case(by_name[e["name"]]))
        la, lr = live["ledger_allocated"], live["ledger_reserved"]
        res = r["peak_reserved"]
        where = "inside" if lr[0] <= res <= lr[1] else ("below" if res < lr[0] else "ABOVE")
        over = res - r["peak_allocated"]
        share = 100 * over / r["peak_allocated"]
        exp = "on" if r["expandable_segments"] else "off"
        rows.append(
            f"| {e['name']} | {_gib(e['traced_peak_allocated'])} | {_gib(r['peak_allocated'])} "
            f"| {_gib(res)} (exp. {exp}) | {_gib(over)} ({share:.1f} %) | "
            f"{_gib(r['unreleasable'])} | {r['segments']} | {len(r['streams'])} | "
            f"{_gib(o['peak_reserved'])} | {_gib(la[0])}–{_gib(la[1])} | "
            f"{_gib(lr[0])}–{_gib(lr[1])} | {where} |"
        )
    return "\n".join(rows)


def published_table() -> str:
    """The traced published rows: published allocated / reserved beside the replay's."""
    doc = json.loads(DATA.read_text(encoding="utf-8"))
    rows = [
        "| published row | published alloc | published reserved | published res − alloc "
        "| traced alloc | replay alloc | replay reserved | replay res − alloc | ledger reserved |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for e in doc.get("published", []):
        r, lr = e["replay"], e["ledger_reserved"]
        pa, pr = e["published_allocated_gib"], e["published_reserved_gib"]
        pub_gap = "—" if pa is None else f"{pr - pa:.2f} ({100 * (pr - pa) / pa:.1f} %)"
        over = r["peak_reserved"] - r["peak_allocated"]
        rows.append(
            f"| {e['name']}{' (as FSDP2)' if e['traced_as_fsdp2'] else ''} | "
            f"{'—' if pa is None else f'{pa:.2f}'} | {pr:.2f} | {pub_gap} | "
            f"{_gib(e['traced_peak_allocated'])} | {_gib(r['peak_allocated'])} | "
            f"{_gib(r['peak_reserved'])} | {_gib(over)} "
            f"({100 * over / r['peak_allocated']:.1f} %) | {_gib(lr[0])}–{_gib(lr[1])} |"
        )
    return "\n".join(rows)


def main(argv: list[str]) -> int:
    if argv == ["--table"]:
        print(table())
        print()
        print(published_table())
        return 0
    if len(argv) == 2 and argv[0] == "--published":
        entry = run_published(argv[1])
        merge(entry, "published")
        print(json.dumps(entry, indent=1))
        return 0
    if len(argv) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    entry = run_case(argv[0])
    merge(entry)
    print(json.dumps(entry, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
