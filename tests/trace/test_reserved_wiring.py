"""The allocator replay wired into the trace: stream tags, settings, record, text (no torch).

Hand-derived figures follow PyTorch's ``c10/cuda/CUDACachingAllocator.cpp`` as
``engine/allocator/rules.py`` restates it: a 6 MiB request is a large-pool request under
10 MiB (``kMinLargeAlloc``), so it takes a 20 MiB segment (``kLargeBuffer``) and leaves
14 MiB (> 1 MiB) split off as a free block; a freed block is reused only by its own
stream (``get_free_block`` searches the stream's pool). FSDP2 makes its all-gather
outputs on ``all_gather_stream`` (``_fsdp_param_group.py``), which is what
``AllocLog.retag`` models.
"""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given
from hypothesis import strategies as st

from engine.allocator.rules import AllocatorConfig
from engine.plan import Plan, with_values
from engine.trace.alloc_log import (
    ALL_GATHER_STREAM,
    REDUCE_SCATTER_STREAM,
    AllocEvent,
    AllocLog,
)
from engine.trace.record import stored_replay, trace_record
from engine.trace.reserved import ONE_STREAM_NOTE, TraceReplay, allocator_config, replay_trace
from engine.trace.text import render
from engine.units import MiB
from tests.trace.test_records import fake_result

SIX = 6 * MiB


def _churn(second_stream: int) -> AllocLog:
    """6 MiB made and freed on the default stream, then 6 MiB on ``second_stream``."""
    log = AllocLog()
    log.alloc(1, SIX)
    log.free(1)
    log.alloc(2, SIX)
    log.retag(2, second_stream)
    log.free(2)
    return log


def test_retag_moves_the_alloc_and_its_free_to_the_side_stream() -> None:
    log = _churn(ALL_GATHER_STREAM)
    assert [(e.kind, e.block, e.stream) for e in log.events] == [
        ("alloc", 0, 0),
        ("free", 0, 0),
        ("alloc", 1, ALL_GATHER_STREAM),
        ("free", 1, ALL_GATHER_STREAM),
    ]
    assert log.streams() == {0, ALL_GATHER_STREAM}


def test_retag_of_a_dead_storage_changes_nothing() -> None:
    log = AllocLog()
    log.alloc(1, SIX)
    log.free(1)
    log.retag(1, REDUCE_SCATTER_STREAM)
    assert {e.stream for e in log.events} == {0}


def test_a_resized_side_stream_buffer_stays_on_its_stream() -> None:
    """FSDP2 frees and regathers by resize: the new block is made on the same stream."""
    log = AllocLog()
    log.alloc(1, SIX)
    log.retag(1, ALL_GATHER_STREAM)
    log.resize(1, 2 * SIX)
    assert [(e.kind, e.nbytes, e.stream) for e in log.events[1:]] == [
        ("free", SIX, ALL_GATHER_STREAM),
        ("alloc", 2 * SIX, ALL_GATHER_STREAM),
    ]


def test_one_stream_reuses_the_cached_block() -> None:
    """Reserved = the one 20 MiB segment; at its peak 6 MiB is live, 14 MiB split off and
    not releasable (the segment is in use)."""
    r = replay_trace(Plan(), _churn(0).events)
    assert r.result.peak_reserved == 20 * MiB
    assert r.result.fragmentation == 14 * MiB and r.result.unreleasable == 14 * MiB
    assert r.result.segments == 1 and r.streams == (0,)
    assert r.streams_text() == ONE_STREAM_NOTE


def test_a_side_stream_gets_its_own_segment() -> None:
    """The all-gather stream cannot take the default stream's cached 20 MiB: a second
    segment, 40 MiB reserved with 6 MiB live (34 MiB fragmentation), of which the wholly
    free default-stream segment (20 MiB) a retry could release: 14 MiB stuck."""
    r = replay_trace(Plan(), _churn(ALL_GATHER_STREAM).events)
    assert r.result.peak_reserved == 40 * MiB
    assert r.result.fragmentation == 34 * MiB and r.result.unreleasable == 14 * MiB
    assert r.result.segments == 2 and r.streams == (0, ALL_GATHER_STREAM)
    assert "all-gather" in r.streams_text() and "2 streams" in r.streams_text()


@pytest.mark.parametrize(
    ("changes", "config"),
    [
        ({}, AllocatorConfig(False, None)),
        ({"stack.name": "torchtitan"}, AllocatorConfig(True, None)),
        ({"runtime.max_split_size_mb": 128}, AllocatorConfig(False, 128 * MiB)),
        ({"runtime.expandable_segments": True}, AllocatorConfig(True, None)),
    ],
)
def test_the_plan_s_allocator_settings_with_the_stack_s_default(
    changes: dict[str, object], config: AllocatorConfig
) -> None:
    """torchtitan's run_train.sh exports expandable_segments:True; PyTorch's default is
    off (``engine/stacks/stack_rules.py``)."""
    assert allocator_config(with_values(Plan(), changes)) == config


def test_expandable_segments_map_20_mib_pages() -> None:
    """Expandable: one growable large-pool segment, mapped in 20 MiB pages — the 6 MiB
    request maps one page, and the second 6 MiB on the same stream reuses it."""
    plan = with_values(Plan(), {"runtime.expandable_segments": True})
    r = replay_trace(plan, _churn(0).events)
    assert r.result.peak_reserved == 20 * MiB and r.expandable_segments
    assert r.settings() == "expandable_segments:True"


def test_the_replay_round_trips_through_json() -> None:
    r = replay_trace(with_values(Plan(), {"runtime.max_split_size_mb": 64}), _churn(1).events)
    assert TraceReplay.from_json(r.to_json()) == r
    assert r.settings() == "expandable_segments:False,max_split_size_mb:64"
    with pytest.raises(ValueError, match="not a trace replay"):
        TraceReplay.from_json({"peak_reserved": 1})


EVENTS = tuple(
    AllocEvent(kind, SIX, block, stream, "1/backward")
    for kind, block, stream in (("alloc", 0, 0), ("free", 0, 0), ("alloc", 1, 1))
)


def test_the_record_keeps_the_replay_and_the_text_prints_it() -> None:
    from engine.estimate import estimate
    from engine.trace.compare import compare

    plan = Plan()
    result = dataclasses.replace(fake_result(), alloc_events=EVENTS)
    record = trace_record(plan, result)
    replayed = stored_replay(record)
    assert replayed is not None and replayed.result.peak_reserved == 40 * MiB
    text = render(result, compare(result, estimate(plan)), "gb", replayed, (10**9, 2 * 10**9))
    assert "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:False" in text
    assert "peak reserved 0.04 GB" in text  # 40 MiB = 41,943,040 B
    assert "ledger reserved 1.00 GB – 2.00 GB — the replay lies below its low" in text


def test_a_record_from_before_the_replay_has_none() -> None:
    record = trace_record(Plan(), fake_result())
    old = record.model_copy(
        update={"extra": {k: v for k, v in record.extra.items() if k != "replay"}}
    )
    assert stored_replay(old) is None


OPS = st.lists(
    st.tuples(
        st.sampled_from(("alloc", "free", "resize", "retag")),
        st.integers(0, 5),
        st.integers(1, 3 * MiB),
        st.sampled_from((0, ALL_GATHER_STREAM, REDUCE_SCATTER_STREAM)),
    ),
    max_size=60,
)


@given(OPS)
def test_every_free_is_on_its_alloc_s_stream(ops: list[tuple[str, int, int, int]]) -> None:
    """Whatever the order of allocs, frees, resizes and retags, a block is freed on the
    stream it was made on (the simulator frees by block id, but the pools are per
    stream), and the replay of the log frees everything it allocated."""
    log = AllocLog()
    for op, key, nbytes, stream in ops:
        if op == "alloc":
            log.alloc(key, nbytes, stream)
        elif op == "free":
            log.free(key)
        elif op == "resize":
            log.resize(key, nbytes)
        else:
            log.retag(key, stream)
    for key in range(6):
        log.free(key)
    made = {e.block: e.stream for e in log.events if e.kind == "alloc"}
    freed = {e.block: e.stream for e in log.events if e.kind == "free"}
    assert freed == made
    r = replay_trace(Plan(), log.events)
    assert r.result.peak_reserved >= r.result.peak_allocated
    assert set(r.streams) == {e.stream for e in log.events} or not log.events
