"""What the window reads of a trace: its progress lines, and a stored record read back
and compared with the ledger (no torch: the result is the hand-built one)."""

from __future__ import annotations

import json

import pytest

from engine.estimate import estimate
from engine.trace.compare import Comparison, Line, compare
from engine.trace.progress import format_line, parse_line, step_message
from engine.trace.record import TRACE_NOTE, latest_trace, result_from_record, trace_record
from engine.trace.text import differences, summary
from engine.validation.records import RecordError, parse_record
from tests.trace.test_records import PLAN, fake_result


@pytest.mark.parametrize(
    ("message", "done"),
    [
        ("build: Llama-3.1-8B (llama) on meta", 0),
        ("shard: world 8, rank 0", 1),
        ("materialise on fake cpu tensors", 2),
        (step_message(1, 2), 3),
        (step_message(2, 2), 4),
        ("done: peak 1,024 B in backward", 5),
    ],
)
def test_progress_lines_count_the_milestones_started(message: str, done: int) -> None:
    """Two steps: build, shard, materialise, step 1, step 2 = 5 milestones; a message
    counts those before it, and done completes them."""
    got = parse_line(format_line(12.34, message), steps=2)
    assert got is not None and (got.done, got.total, got.elapsed) == (done, 5, 12.3)
    assert got.message == message and got.finished == (done == 5)


def test_other_stderr_text_is_not_progress() -> None:
    assert parse_line("UserWarning: something", 2) is None
    assert parse_line("memplan: DeepSpeed (ZeRO) cannot be traced", 2) is None


def test_a_stored_record_reads_back_as_the_trace() -> None:
    result = fake_result()
    record = parse_record(json.loads(json.dumps(trace_record(PLAN, result).to_json())))
    back = result_from_record(record)
    assert back.to_json() == result.to_json()
    assert TRACE_NOTE not in back.notes


def test_a_damaged_or_gpu_record_is_refused_with_its_name() -> None:
    record = trace_record(PLAN, fake_result())
    damaged = record.model_copy(update={"extra": {**record.extra, "phases": [{"step": 1}]}})
    with pytest.raises(RecordError, match="cannot be read back"):
        result_from_record(damaged)
    with pytest.raises(RecordError, match="not a trace record"):
        result_from_record(parse_record({"format": "memplan-measurement", "rank": 0}))


def test_the_newest_trace_of_this_plan_is_shown_first() -> None:
    """Same config first (newest by creation time), else the newest of any."""
    old = trace_record(PLAN, fake_result()).model_copy(update={"created": "2026-01-01"})
    new = old.model_copy(update={"created": "2026-02-01", "label": "new"})
    other = new.model_copy(update={"created": "2026-03-01", "config_hash": "f" * 64})
    assert latest_trace([old, new, other], PLAN.config_hash()) is new
    assert latest_trace([old, other], "e" * 64) is other
    assert latest_trace([], PLAN.config_hash()) is None


def _cmp(*groups: Line) -> Comparison:
    return Comparison(Line("peak", 100, 90, 110), groups, ())


def test_differences_name_each_figure_outside_the_range_largest_first() -> None:
    """activations 130 vs 100–110: 20 above; weights 40 vs 50–50: 10 below; a group the
    ledger has no row for counts all of its 5; buffers 3 inside: not named."""
    cmp = _cmp(
        Line("weights", 40, 50, 50),
        Line("activations", 130, 100, 110),
        Line("buffers", 3, 0, 10),
        Line("grad_buckets", 5, None, None),
    )
    lines = differences(cmp, "gb")
    assert [d.split(":")[0] for d in lines] == [
        "group activations",
        "group weights",
        "group grad_buckets",
    ]
    assert "above the ledger's high" in lines[0] and "below its low" in lines[1]
    assert "no ledger row" in lines[2]
    assert differences(_cmp(Line("buffers", 3, 0, 10)), "gb") == [
        "every traced figure lies inside the ledger's range"
    ]


def test_summary_warns_when_the_plan_changed_since_the_trace() -> None:
    result, est = fake_result(), estimate(PLAN)
    cmp = compare(result, est)
    same = summary(result, cmp, PLAN.config_hash(), est.config_hash, "gb")
    assert "WARNING" not in same and "Traced peak 47.00 GB in backward" in same
    other = summary(result, cmp, "a" * 64, est.config_hash, "gb")
    warning = f"WARNING: traced for config {'a' * 12}, but this plan is {est.config_hash[:12]}"
    assert warning in other
