"""The same bad value reads the same on every path (issue 38): ``--set`` and ``memplan
new`` say one sentence per problem, count suffixes and thousands separators are read
alike, and an unknown field or a preset given as ``--model`` gets a suggestion."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.cli import main
from engine.cli.common import CliError, apply_sets, parse_set
from engine.cli.plan_paths import did_you_mean, dotted_paths
from engine.fileio.number_text import not_a_number, number_from_text
from engine.plan import default_plan

SEQ = "batch.seq_len"


@pytest.mark.parametrize(
    ("text", "value"),
    [("8192", 8192), ("8,192", 8192), ("8_192", 8192), ("8k", 8000), ("8K", 8000),
     ("1.5M", 1_500_000), ("1e3", 1000), ("2.5", 2.5), ("abc", None), ("8kb", None),
     ("", None), ("1,,", None), ("1,2", None), ("1,234,567", 1234567)],
)  # fmt: skip
def test_number_text(text: str, value: int | float | None) -> None:
    got = number_from_text(text)
    assert got == value and type(got) is type(value)


def test_suffixes_and_separators_are_read_by_set() -> None:
    # "8,192" is not JSON; it was taken as the string "8,192" and refused by pydantic.
    assert parse_set(f"{SEQ}=8,192") == (SEQ, 8192)
    assert parse_set(f"{SEQ}=8k") == (SEQ, 8000)
    assert apply_sets(default_plan(), [f"{SEQ}=8k"]).batch.seq_len == 8000
    assert parse_set("model.name=abc") == ("model.name", "abc")
    # a text field keeps what was typed: "8k" and "1,000" are names there, not numbers
    assert apply_sets(default_plan(), ["model.name=8k"]).model.name == "8k"
    assert apply_sets(default_plan(), ["model.name=1,000"]).model.name == "1,000"


def _refusal(value: str) -> str:
    with pytest.raises(CliError) as info:
        apply_sets(default_plan(), [f"{SEQ}={value}"])
    return str(info.value)


def test_bad_numbers_are_one_sentence() -> None:
    """``abc`` and ``1e15`` both read "path: sentence (got value)", no pydantic wording;
    the sentence for ``abc`` is the one the window's field says (engine.fileio.number_text)."""
    assert _refusal("abc") == f"plan.{SEQ}: {not_a_number('abc', True)}"
    assert _refusal("abc") == "plan.batch.seq_len: expected a whole number (got 'abc')"
    big = _refusal("1e15")
    assert big.startswith(f"plan.{SEQ}: must be at most ") and "Input should" not in big
    assert big.endswith("(got 1000000000000000)")  # as the window reads 1e15


def test_new_says_the_same(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(["new", "-o", str(tmp_path / "p.memplan"), "--set", f"{SEQ}=abc"])
    err = capsys.readouterr().err
    assert rc == 1 and err.strip().endswith(_refusal("abc"))
    assert main(["new", "-o", str(tmp_path / "k.memplan"), "--set", f"{SEQ}=8k"]) == 0


def test_unknown_field_suggests_the_close_one() -> None:
    assert SEQ in dotted_paths(default_plan())
    assert did_you_mean("batch.seq_lenn", default_plan()) == " — did you mean 'batch.seq_len'?"
    assert did_you_mean("zzz.qqq", default_plan()) == ""
    with pytest.raises(
        CliError, match=r"unknown field 'batch.seqlen' — did you mean 'batch.seq_len'"
    ):
        apply_sets(default_plan(), ["batch.seqlen=1"])


def test_a_preset_given_as_model_suggests_preset(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty-cache"))
    monkeypatch.setenv("HF_HOME", str(tmp_path / "empty-home"))
    rc = main(["new", "-o", str(tmp_path / "p.memplan"), "--model", "llama-3.1-8b"])
    err = capsys.readouterr().err
    assert rc == 1
    assert "'llama-3.1-8b' is a model preset: use --preset llama-3.1-8b" in err
