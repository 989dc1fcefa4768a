"""The strict JSON reader: every hostile construct refused with one short sentence that
names where it is; what a plan legitimately holds passes unchanged."""

from __future__ import annotations

import json
from typing import Any

import pytest

from engine.errors import MAX_MESSAGE_CHARS, PlanFileError, field_path, quote
from engine.fileio import strict_json
from engine.fileio.strict_json import MAX_DEPTH, MAX_FILE_BYTES, decode, loads, max_depth


def refusal(text: str) -> str:
    with pytest.raises(PlanFileError) as info:
        loads(text)
    message = str(info.value)
    assert len(message) <= MAX_MESSAGE_CHARS and "\n" not in message
    return message


def test_ordinary_json_passes_unchanged() -> None:
    doc: dict[str, Any] = {"a": [1, 2.5, -3e-7, True, None, "x\u00e9\U0001f600"], "b": {"c": {}}}
    assert loads(json.dumps(doc)) == doc
    assert loads(json.dumps(doc, ensure_ascii=True)) == doc  # an escaped surrogate *pair* is fine


@pytest.mark.parametrize(
    ("text", "depth"),
    [("1", 0), ("[]", 1), ('{"a": [[{}]]}', 4), ('["[[[[", {"k": "]]]"}]', 2), (r'["\"[["]', 1)],
)
def test_depth_counts_brackets_outside_strings(text: str, depth: int) -> None:
    assert max_depth(text) == depth


@pytest.mark.parametrize("text", ["[" * 1000, '{"a":' * 1000, "[" * (MAX_DEPTH + 1) + "]" * 65])
def test_deep_nesting_is_refused_before_parsing(text: str) -> None:
    assert f"more than {MAX_DEPTH} levels" in refusal(text)


def test_nesting_up_to_the_limit_parses() -> None:
    assert loads("[" * MAX_DEPTH + "]" * MAX_DEPTH) is not None


def test_a_5000_digit_number_is_refused_with_its_path() -> None:
    message = refusal('{"plan": {"batch": {"seq_len": ' + "9" * 5000 + "}}}")
    assert message.startswith("plan.batch.seq_len: a number 5,000 characters long")


@pytest.mark.parametrize("literal", ["NaN", "Infinity", "-Infinity", "1e999", "-1e400"])
def test_non_finite_numbers_are_refused(literal: str) -> None:
    assert refusal('{"x": [0, ' + literal + "]}").startswith("x.1: ")


def test_duplicate_keys_are_refused_with_the_key_path() -> None:
    message = refusal('{"plan": {"batch": {"seq_len": 1, "seq_len": 2}}}')
    assert message.startswith("plan.batch.seq_len: this key appears more than once")


@pytest.mark.parametrize(
    ("text", "where"),
    [
        (r'{"name": "x\ud83d"}', "name: "),
        (r'{"m": [{"note": "\udc00 tail"}]}', "m.0.note: "),
        (r'{"plan": {"k\ud800": 1}}', "plan: "),
    ],
)
def test_lone_surrogates_are_refused_with_the_field_path(text: str, where: str) -> None:
    message = refusal(text)
    assert message.startswith(where) and "lone UTF-16 surrogate" in message
    message.encode("utf-8")  # the message itself never holds the surrogate


def test_bom_is_accepted_and_bad_utf8_named_by_byte() -> None:
    assert decode(b"\xef\xbb\xbf{}", "p.memplan") == "{}"
    with pytest.raises(PlanFileError, match=r"not UTF-8 text \(byte 3 is not valid\)"):
        decode(b'{"a\xff": 1}', "p.memplan")


def test_size_limit_refuses_before_decoding() -> None:
    with pytest.raises(PlanFileError, match="over 16 MiB"):
        decode(b" " * (MAX_FILE_BYTES + 1), "big.memplan")


def test_hostile_keys_are_shortened_and_escaped_in_paths() -> None:
    assert field_path(["plan", "k" * 1000]) == "plan." + "k" * 39 + "…"
    assert field_path(["a\u202eb", 3]) == "a\\u202eb.3"


def test_quote_keeps_bad_values_short() -> None:
    assert len(quote("x" * 1_000_000)) <= 82
    assert quote(10**5000) == "<an integer of about 5,000 digits>"
    assert quote("a\ud83d") == "'a\\ud83d'"


def test_save_side_replaces_lone_surrogates() -> None:
    assert strict_json.without_lone_surrogates("a\ud83db\U0001f600") == "a\ufffdb\U0001f600"
