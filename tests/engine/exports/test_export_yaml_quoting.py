"""accelerate's YAML writer quotes every string so that PyYAML (what accelerate's
``load_config_from_file`` uses: ``yaml.safe_load``, accelerate
``commands/config/config_args.py``) and MemPlan's own reader both read back the very
string written (issue 33: plan text is written as data, never as syntax)."""

from __future__ import annotations

from typing import Any

import yaml
from hypothesis import given
from hypothesis import strategies as st

from engine.exports.flat_yaml import read_flat_yaml, to_yaml

BY_HAND = [
    "-1",  # a YAML int if plain
    "-0x1f",  # a YAML 1.1 hex int if plain
    "inf",  # Python's float() reads it
    "NaN",
    "１２",  # fullwidth digits: Python's int() reads 12
    "tRuE",  # MemPlan's reader lowercases booleans
    "a #b",  # a comment if unquoted
    "it's #1",
    'say "hi" #x',
    "x\ny",  # a raw line break folds to a space inside quotes
    "tab\there",
    "\u2028\x85\x00\x1b",
    "\U0001f600 emoji",
    "LOCAL_MACHINE",  # plain, as accelerate writes it
]


def _round_trip(value: Any) -> None:
    cfg = {"k": value, "section": {"a": value, "b": 1}}
    text = to_yaml(cfg, "# header\n")
    assert yaml.safe_load(text) == cfg, text
    assert read_flat_yaml(text) == cfg, text


def test_strings_written_by_hand_read_back_whole() -> None:
    for s in BY_HAND:
        _round_trip(s)
    assert to_yaml({"k": "LOCAL_MACHINE"}) == "k: LOCAL_MACHINE\n"
    assert to_yaml({"k": "-1"}) == "k: '-1'\n"


def test_floats_read_back_as_floats() -> None:
    """PyYAML 1.1 reads ``1e-05`` as a string: the writer adds the dot (``1.0e-05``)."""
    for v in (1e-05, 0.0001, 2.5, 1e20, -3e-7):
        _round_trip(v)
    assert to_yaml({"lr": 1e-05}) == "lr: 1.0e-05\n"


@given(st.text(max_size=40))
def test_any_string_reads_back_whole(s: str) -> None:
    _round_trip(s)
