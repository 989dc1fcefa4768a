"""The .memplan file: round trips, bad input, atomic saves and migrations."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from engine import planfile
from engine.fileio import atomic
from engine.plan import canonical_hash, default_plan, with_value, with_values
from engine.planfile import SCHEMA_VERSION, PlanFile, PlanFileError, load, save
from engine.presets import plan_for_model_preset

DATA = Path(__file__).resolve().parent.parent / "data"


def _doc() -> dict[str, Any]:
    return planfile.to_document(PlanFile(plan=default_plan(), name="t"))


def _write(tmp_path: Path, doc: Any) -> Path:
    p = tmp_path / "x.memplan"
    p.write_text(doc if isinstance(doc, str) else json.dumps(doc), encoding="utf-8")
    return p


def test_round_trip_preserves_hash_and_metadata(tmp_path: Path) -> None:
    plan = with_value(default_plan(), "batch.seq_len", 8192)
    path = tmp_path / "p.memplan"
    save(PlanFile(plan=plan, name="Ä plan", notes="line1\nline2"), path)
    back = load(path)
    assert back.plan == plan
    assert back.config_hash == plan.config_hash()
    assert back.stored_hash == plan.config_hash()
    assert (back.name, back.notes) == ("Ä plan", "line1\nline2")
    assert back.extra_messages == ()
    doc = json.loads(path.read_text(encoding="utf-8"))
    assert doc["format"] == "memplan" and doc["schema_version"] == SCHEMA_VERSION


def test_hash_ignores_metadata_but_not_inputs() -> None:
    a = PlanFile(plan=default_plan(), name="a", notes="x")
    b = PlanFile(plan=default_plan(), name="b", notes="y")
    assert a.config_hash == b.config_hash
    assert with_value(default_plan(), "batch.micro_batch", 2).config_hash() != a.config_hash


@pytest.mark.parametrize(
    ("mutate", "expected"),
    [
        (lambda d: "{not json", "not valid JSON"),
        (lambda d: "[1, 2]", "top level must be a JSON object"),
        (lambda d: {**d, "format": "other"}, '"format" must be "memplan"'),
        (lambda d: {k: v for k, v in d.items() if k != "schema_version"}, 'no "schema_version"'),
        (
            lambda d: {**d, "plan": {**d["plan"], "batch": {**d["plan"]["batch"], "seq_len": -4}}},
            "plan.batch.seq_len: must be at least 1 (got -4)",
        ),
        (
            lambda d: {
                **d,
                "plan": {**d["plan"], "batch": {**d["plan"]["batch"], "micro_batch": 10**9}},
            },
            "plan.batch.micro_batch: must be at most 1,000,000",
        ),
        (
            lambda d: {**d, "plan": {k: v for k, v in d["plan"].items() if k != "hardware"}},
            "plan.hardware: required section is missing",
        ),
        (
            lambda d: {**d, "plan": {**d["plan"], "batch": {**d["plan"]["batch"], "sq_len": 1}}},
            "plan.batch.sq_len: unknown field",
        ),
        (lambda d: {**d, "bogus": 1}, "bogus: unknown field at the top level"),
        (lambda d: {**d, "schema_version": 99}, "newer than this MemPlan understands"),
        (lambda d: {**d, "schema_version": "1"}, "schema_version must be a non-negative integer"),
    ],
)
def test_bad_input_gives_one_clear_sentence(tmp_path: Path, mutate: Any, expected: str) -> None:
    path = _write(tmp_path, mutate(_doc()))
    with pytest.raises(PlanFileError) as info:
        load(path)
    message = str(info.value)
    assert expected in message
    assert "\n" not in message


def test_newer_schema_is_refused_and_file_untouched(tmp_path: Path) -> None:
    doc = {**_doc(), "schema_version": SCHEMA_VERSION + 1}
    path = _write(tmp_path, doc)
    before = path.read_bytes()
    with pytest.raises(PlanFileError, match="the file was not changed"):
        load(path)
    assert path.read_bytes() == before


def test_not_utf8_and_missing_file(tmp_path: Path) -> None:
    p = tmp_path / "bin.memplan"
    p.write_bytes(b"\xff\xfe\x00garbage")
    with pytest.raises(PlanFileError, match="not UTF-8"):
        load(p)
    with pytest.raises(PlanFileError, match="cannot read"):
        load(tmp_path / "absent.memplan")


def test_interrupted_save_leaves_old_file_intact(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "keep.memplan"
    save(PlanFile(plan=default_plan(), name="old"), path)
    before = path.read_bytes()

    def crash(src: str, dst: Path) -> None:
        raise OSError("power cut between write and rename")

    monkeypatch.setattr(atomic, "_replace", crash)
    changed = with_value(default_plan(), "batch.seq_len", 1234)
    with pytest.raises(OSError, match="power cut"):  # a SaveError, still an OSError
        save(PlanFile(plan=changed, name="new"), path)
    assert path.read_bytes() == before
    assert load(path).name == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["keep.memplan"]  # temp file cleaned


def test_schema_zero_file_is_migrated_and_says_so() -> None:
    pf = load(DATA / "plan_v0.memplan")
    assert pf.upgraded_from == 0
    assert pf.name == "Draft from the pre-release planner"
    assert pf.plan.batch.seq_len == 2048 and pf.plan.batch.micro_batch == 2
    assert any("upgraded" in m for m in pf.extra_messages)


def test_migrated_file_saves_as_current_version(tmp_path: Path) -> None:
    pf = load(DATA / "plan_v0.memplan")
    out = tmp_path / "up.memplan"
    save(pf, out)
    doc = json.loads(out.read_text(encoding="utf-8"))
    assert doc["schema_version"] == SCHEMA_VERSION and "inputs" not in doc
    assert load(out).upgraded_from is None


def test_hand_edited_hash_is_reported(tmp_path: Path) -> None:
    doc = {**_doc(), "config_hash": "0" * 64}
    pf = load(_write(tmp_path, doc))
    assert any("does not match" in m for m in pf.extra_messages)


def test_a_file_from_before_a_new_input_opens_without_a_hash_warning(tmp_path: Path) -> None:
    """A file written before ``model.architecture.residual`` existed lacks the key; the
    default fills it, which changes the plan's hash, but the stored hash still equals
    the hash of the plan *as written*, so the file is not called hand-edited. Editing a
    value of such a file by hand is still caught."""
    doc = _doc()
    del doc["plan"]["model"]["architecture"]["residual"]
    doc["config_hash"] = canonical_hash(doc["plan"])
    pf = load(_write(tmp_path, doc))
    assert not pf.extra_messages and pf.plan == default_plan()
    doc["plan"]["batch"]["seq_len"] = 1024
    assert any("does not match" in m for m in load(_write(tmp_path, doc)).extra_messages)


def test_every_migration_step_exists() -> None:
    assert set(planfile.MIGRATIONS) == set(range(SCHEMA_VERSION))


def test_a_lone_surrogate_in_the_name_is_refused_at_load_with_the_field(tmp_path: Path) -> None:
    text = json.dumps({**_doc(), "name": "x\ud83d"})  # json writes it as the escape \ud83d
    with pytest.raises(PlanFileError, match=r"^name: holds half of a character"):
        load(_write(tmp_path, text))


def test_save_never_fails_on_text_that_did_not_come_from_a_file(tmp_path: Path) -> None:
    """A name typed or pasted in the window can hold half an emoji; it is written as
    U+FFFD and the file reopens."""
    path = tmp_path / "s.memplan"
    save(PlanFile(plan=default_plan(), name="half \ud83d emoji", notes="\udc00"), path)
    back = load(path)
    assert (back.name, back.notes) == ("half \ufffd emoji", "\ufffd")


def test_a_utf8_bom_is_accepted(tmp_path: Path) -> None:
    path = tmp_path / "bom.memplan"
    path.write_bytes(b"\xef\xbb\xbf" + json.dumps(_doc()).encode("utf-8"))
    assert load(path).plan == default_plan()


def test_a_1mb_bad_value_gives_a_short_message(tmp_path: Path) -> None:
    doc = _doc()
    doc["plan"]["batch"]["seq_len"] = "9" * 1_000_000 + "x"
    with pytest.raises(PlanFileError) as info:
        load(_write(tmp_path, doc))
    message = str(info.value)
    assert message.startswith("plan.batch.seq_len: ")
    assert len(message) < 300 and "..." in message


@pytest.mark.parametrize("value", [0, -1, -(10**9), 10**7])
def test_reshard_after_forward_refuses_out_of_range_group_sizes(tmp_path: Path, value: int) -> None:
    """torch's fully_shard takes an int as the group size to reshard to (at least 1)."""
    doc = _doc()
    doc["plan"]["parallelism"]["knobs"]["fsdp_reshard_after_forward"] = value
    with pytest.raises(PlanFileError, match="fsdp_reshard_after_forward: as a number it is"):
        load(_write(tmp_path, doc))


@pytest.mark.parametrize("value", [True, False, 2, 8])  # 1 is stored as False: test_reshard_int.py
def test_reshard_after_forward_keeps_booleans_and_group_sizes(value: bool | int) -> None:
    plan = with_value(default_plan(), "parallelism.knobs.fsdp_reshard_after_forward", value)
    assert plan.parallelism.knobs.fsdp_reshard_after_forward is value or (
        plan.parallelism.knobs.fsdp_reshard_after_forward == value
        and type(plan.parallelism.knobs.fsdp_reshard_after_forward) is type(value)
    )


def test_what_is_not_a_regular_file_is_refused_without_reading(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe.memplan"
    os.mkfifo(fifo)
    with pytest.raises(PlanFileError, match="pipe.memplan is not a regular file"):
        load(fifo)  # opening a FIFO for reading would block forever
    with pytest.raises(PlanFileError, match="is not a regular file"):
        load("/dev/zero")
    with pytest.raises(PlanFileError, match="cannot read|not a regular file"):
        load(tmp_path)


def test_save_returns_the_file_written(tmp_path: Path) -> None:
    real = tmp_path / "real.memplan"
    save(PlanFile(plan=default_plan()), real)
    link = tmp_path / "link.memplan"
    link.symlink_to(real)
    assert save(PlanFile(plan=default_plan(), name="via link"), link) == real
    assert link.is_symlink() and load(real).name == "via link"


def test_schema_1_files_keep_their_meaning_under_ep_folding(tmp_path: Path) -> None:
    """Schema 1 counted world = TP × PP × CP × EP × DP and DP × EP replicas; schema 2
    folds EP over TP × CP × DP. A schema-1 Mixtral plan with EP 8 × DP 2 (16 ranks, 16
    replicas) opens as DP 16 with EP 8 — the same 16 ranks and 16 replicas — says it was
    upgraded, and keeps the even split it was computed with."""
    plan = with_values(
        plan_for_model_preset("mixtral-8x7b"), {"parallelism.ep": 8, "parallelism.dp": 16}
    )
    path = tmp_path / "old.memplan"
    save(PlanFile(plan), path)
    doc = json.loads(path.read_text(encoding="utf-8"))
    doc["schema_version"] = 1
    doc["plan"]["parallelism"]["dp"] = 2  # as schema 1 wrote this 16-rank layout
    del doc["plan"]["parallelism"]["pp_split_policy"]
    path.write_text(json.dumps(doc), encoding="utf-8")
    pf = load(path)
    par = pf.plan.parallelism
    assert pf.upgraded_from == 1
    assert (par.ep, par.dp, par.world_size) == (8, 16, 16)
    assert par.pp_split_policy == "even"


def test_a_bad_union_value_names_the_field_not_the_union_member() -> None:
    """``fsdp_reshard_after_forward`` is ``bool | int``: pydantic reports one error per
    member with the member's tag in the location (``….fsdp_reshard_after_forward.bool``),
    which no user can act on; the message names the field itself."""
    from pydantic import ValidationError

    from engine.plan import Plan, describe_validation_error

    doc = json.loads(default_plan().model_dump_json())
    doc["parallelism"]["knobs"]["fsdp_reshard_after_forward"] = "sometimes"
    with pytest.raises(ValidationError) as caught:
        Plan.model_validate(doc)
    problems = describe_validation_error(caught.value, "plan")
    assert problems
    for text in problems:
        assert text.startswith("plan.parallelism.knobs.fsdp_reshard_after_forward: "), text
