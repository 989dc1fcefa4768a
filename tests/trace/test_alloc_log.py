"""The allocation/free sequence a trace records (``engine/trace/alloc_log.py``).

The bookkeeping is checked by hand on a short sequence; a real trace (tiny Llama,
transformers path) is replayed: with the allocator's 512-B rounding, what its events
leave live must be exactly what the tracker says is live at the end, and the replayed
running total must reach the traced peak (the tracker samples after each op, so the
replay can only see more, never less).
"""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from engine.trace.alloc_log import (
    ALL_GATHER_STREAM,
    REDUCE_SCATTER_STREAM,
    AllocEvent,
    AllocLog,
    events_from_json,
    events_to_json,
)
from engine.trace.record import result_from_record, trace_record
from engine.validation.records import MeasuredRecord
from tests.trace.grid import Case, measure
from tests.trace.needs_extra import needs_trace_extra
from tests.trace.test_records import PLAN, fake_result


def test_alloc_free_resize_by_hand() -> None:
    """Storage 7 of 100 B in setup; storage 8 of 0 B (nothing); in 0/forward storage 7
    is resized to 300 B (free block 0, alloc block 1) and storage 8 to 64 B (alloc block
    2); then 7 dies (free block 1) and a second free of it is ignored."""
    log = AllocLog()
    log.alloc(7, 100)
    log.alloc(8, 0)
    log.phase = "0/forward"
    log.resize(7, 300)
    log.resize(8, 64)
    log.resize(8, 64)  # same size: nothing happens
    assert log.live_bytes == 364
    log.free(7)
    log.free(7)
    assert log.events == [
        AllocEvent("alloc", 100, 0, 0, "setup"),
        AllocEvent("free", 100, 0, 0, "0/forward"),
        AllocEvent("alloc", 300, 1, 0, "0/forward"),
        AllocEvent("alloc", 64, 2, 0, "0/forward"),
        AllocEvent("free", 300, 1, 0, "0/forward"),
    ]
    assert log.live_bytes == 64


@given(st.lists(st.tuples(st.sampled_from(["alloc", "free", "resize"]), st.integers(0, 5),
                          st.integers(0, 4096)), max_size=60))  # fmt: skip
def test_every_free_pairs_with_an_earlier_alloc(ops: list[tuple[str, int, int]]) -> None:
    log = AllocLog()
    for op, key, nbytes in ops:
        if op == "alloc":
            log.alloc(key, nbytes)
        elif op == "free":
            log.free(key)
        else:
            log.resize(key, nbytes)
    open_blocks: dict[int, int] = {}
    for e in log.events:
        if e.kind == "alloc":
            assert e.block not in open_blocks and e.nbytes > 0
            open_blocks[e.block] = e.nbytes
        else:
            assert open_blocks.pop(e.block) == e.nbytes
    assert sum(open_blocks.values()) == log.live_bytes
    assert events_from_json(events_to_json(log.events)) == tuple(log.events)


def test_malformed_events_are_refused() -> None:
    with pytest.raises(ValueError, match="alloc or free"):
        events_from_json([["grow", 1, 0, 0, "setup"]])
    with pytest.raises(ValueError, match="5-item"):
        events_from_json([["alloc", 1, 0]])


def test_the_record_carries_the_events_and_reads_them_back() -> None:
    events = (AllocEvent("alloc", 512, 0, 0, "setup"), AllocEvent("free", 512, 0, 0, "1/backward"))
    result = fake_result().__class__(**{**_fields(fake_result()), "alloc_events": events})
    record = trace_record(PLAN, result, "p")
    doc = record.to_json()
    assert doc["alloc_events"] == [["alloc", 512, 0, 0, "setup"], ["free", 512, 0, 0, "1/backward"]]
    again = MeasuredRecord.model_validate(doc)
    assert result_from_record(again).alloc_events == events


def test_a_gpu_record_is_stored_without_the_field() -> None:
    assert "alloc_events" not in MeasuredRecord(max_allocated_bytes=1).to_json()


def _fields(result: object) -> dict[str, object]:
    return {f: getattr(result, f) for f in result.__dataclass_fields__}  # type: ignore[attr-defined]


def replay(events: tuple[AllocEvent, ...], rounding: int) -> tuple[int, int]:
    """(live at the end, highest live) with every request rounded up to ``rounding``."""
    live = peak = 0
    for e in events:
        size = math.ceil(e.nbytes / rounding) * rounding
        live += size if e.kind == "alloc" else -size
        peak = max(peak, live)
    return live, peak


@needs_trace_extra
def test_a_traced_sequence_replays_to_the_tracker_totals() -> None:
    r = measure(Case("llama", {"strategy": "fsdp4"})).result
    # FSDP2 (_fsdp_collectives.py): all-gather outputs on the copy-in stream, made in
    # forward and (regathered) in backward; reduce-scatter outputs on the reduce-scatter
    # stream, in backward only (they become the sharded gradients, freed by zero_grad)
    sides = {0, ALL_GATHER_STREAM, REDUCE_SCATTER_STREAM}
    assert r.alloc_events and {e.stream for e in r.alloc_events} == sides
    phase_of = {
        s: {e.phase.split("/")[-1] for e in r.alloc_events if e.stream == s and e.kind == "alloc"}
        for s in sides
    }
    assert phase_of[ALL_GATHER_STREAM] == {"forward", "backward"}
    assert phase_of[REDUCE_SCATTER_STREAM] == {"backward"}
    phases = {e.phase for e in r.alloc_events}
    assert {"setup", "1/forward", "1/backward", "1/optimizer"} <= phases
    live, peak = replay(r.alloc_events, r.setup.rounding_bytes)
    assert live == r.steady_end.total
    assert peak >= r.peak_bytes
