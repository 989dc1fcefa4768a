"""Issue 33's hostile import cases: every one refused in one sentence naming the file
(and the key), or imported as a plan that saves and reopens; nothing blocks.

Each import runs under the fuzz suite's 10 s deadline (``tests.fuzz.run_imports``), so a
regression that blocks on a FIFO or loops fails the test instead of hanging the suite.
"""

from __future__ import annotations

import json
import os
import struct
from collections.abc import Callable
from pathlib import Path

import pytest

from engine.cli import main
from engine.cli.common import EXIT_BAD_PLAN
from engine.exports.common import Imported
from engine.exports.import_guard import IMPORT_MESSAGE_CHARS, ImportRefused
from engine.exports.importers import import_file
from engine.models.hf_cache import ModelNotCachedError, import_cached_model
from engine.plan import Plan, default_plan
from engine.planfile import PlanFile, load, save
from tests.fuzz.run_imports import DEADLINE_S, deadline

CONFIGS = Path(__file__).resolve().parents[2] / "data" / "configs"
LLAMA = json.loads((CONFIGS / "llama-3.2-1b.json").read_text(encoding="utf-8"))


def _import(path: Path, kind: str | None = None) -> Imported:
    with deadline(DEADLINE_S):
        return import_file(path, default_plan(), kind)


def _refused(path: Path, kind: str | None = None) -> str:
    with pytest.raises(ImportRefused) as info:
        _import(path, kind)
    message = str(info.value)
    assert len(message) <= IMPORT_MESSAGE_CHARS and "\n" not in message
    assert "Traceback" not in message and "https://" not in message
    return message


def _reopens(plan: Plan, tmp_path: Path) -> None:
    out = tmp_path / "imported.memplan"
    save(PlanFile(plan=plan), out)
    assert load(out).plan == plan


def _write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


# --- files that are not regular, or not small -------------------------------------------


def test_devices_fifos_and_folders_are_refused_unread(tmp_path: Path) -> None:
    assert "not a regular file" in _refused(Path("/dev/zero"), "deepspeed")
    fifo = tmp_path / "ds_config.json"
    os.mkfifo(fifo)  # open() would block until a writer appears
    assert _refused(fifo) == "ds_config.json is not a regular file (a folder, device or pipe)"
    link = tmp_path / "job.toml"
    link.symlink_to("/dev/zero")
    assert "not a regular file" in _refused(link)
    assert "is a folder" in _refused(tmp_path, "megatron")


def test_a_config_a_plan_could_not_keep_is_refused(tmp_path: Path) -> None:
    """The issue's 17 MiB config saved, then was refused on reopen. A plan keeps a
    config.json whole and saves it indented (about 6x for a list of numbers), so MemPlan
    reads configs up to 1/16 of the loader's 16 MiB: 1 MiB."""
    (tmp_path / "m").mkdir()
    pad = "x" * (17 * 2**20)
    _write(tmp_path / "m", "config.json", json.dumps({**LLAMA, "pad": pad}))
    assert _refused(tmp_path / "m") == (
        "m: config.json is over 1 MiB, far larger than any file MemPlan imports"
    )
    ds = _write(tmp_path, "ds.json", json.dumps({"x": [0] * 2**19}))  # 1.5 MiB
    assert "ds.json is over 1 MiB" in _refused(ds)


def test_a_thousand_unknown_keys_give_fifty_warnings(tmp_path: Path) -> None:
    got = _import(_write(tmp_path, "ds.json", json.dumps({f"k{i}": 1 for i in range(1000)})))
    assert len(got.warnings) == 50  # 49 shown, then the count of the other 951
    assert got.warnings[-1] == "… and 951 more warnings"


# --- numbers and nesting the loader refuses ------------------------------------------------


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ('{"train_micro_batch_size_per_gpu": Infinity}', "train_micro_batch_size_per_gpu"),
        ('{"train_micro_batch_size_per_gpu": 1e999}', "too large"),
        ('{"train_batch_size": NaN}', "train_batch_size: NaN"),
        ('{"gradient_accumulation_steps": ' + "9" * 151 + "}", "151 characters"),
        ('{"a":' * 2000 + "1" + "}" * 2000, "more than 64 levels"),
        ('{"bf16": {"enabled": true}, "bf16": {"enabled": false}}', "more than once"),
    ],
)
def test_ds_config_values_no_plan_holds_are_refused_naming_the_key(
    tmp_path: Path, text: str, words: str
) -> None:
    assert words in _refused(_write(tmp_path, "ds_config.json", text))


@pytest.mark.parametrize(
    ("extra", "words"),
    [
        ('"rope_theta": NaN', "rope_theta: NaN"),  # json.dumps would store it as null
        ('"initializer_range": -Infinity', "initializer_range"),
        ('"x": ' + "9" * 151, "151 characters"),
        ('"x": ' + '{"k":' * 61 + "1" + "}" * 61, "more than 60 levels"),  # 62 deep
    ],
)
def test_config_json_the_saved_plan_could_not_reopen_is_refused(
    tmp_path: Path, extra: str, words: str
) -> None:
    """A config.json is kept whole in ``model.hf_config``, which sits four levels down a
    .memplan file: 60 levels of its own is the most the loader's 64 then allows."""
    text = json.dumps(LLAMA)[:-1] + ", " + extra + "}"
    message = _refused(_write(tmp_path, "config.json", text))
    assert message.startswith("config.json") and words in message


def test_hostile_but_legal_configs_import_save_and_reopen(tmp_path: Path) -> None:
    """At the limits (60 levels, a 100-digit number) and with odd text, the import is
    accepted only because the plan it makes reopens; check that it does."""
    deep: object = 1
    for _ in range(59):  # 59 nested objects under "x": 60 levels with the top one
        deep = {"k": deep}
    odd = {"x": deep, "big": int("9" * 100), "s": "a\u2028b\x1b[31m\ud800"[:-1], "é": [[]]}
    got = _import(_write(tmp_path, "config.json", json.dumps({**LLAMA, **odd})))
    assert got.plan.model.hf_config is not None and got.plan.model.hf_config["big"] == 10**100 - 1
    _reopens(got.plan, tmp_path)


# --- wrong types and zero sizes: warned, never a traceback or a silent default ------------


def test_batch_zero_and_wrong_typed_sections_warn(tmp_path: Path) -> None:
    ds = {
        "train_micro_batch_size_per_gpu": 0,  # was ZeroDivisionError in train_batch_size % 0
        "train_batch_size": 16,
        "zero_optimization": [3],  # was AttributeError
        "bf16": "yes",
        "bfloat16": {"enabled": True},  # was AttributeError on the bf16 string
    }
    got = _import(_write(tmp_path, "ds_config.json", json.dumps(ds)))
    text = "\n".join(got.warnings)
    assert "train_micro_batch_size_per_gpu = 0 is below 1" in text
    assert "zero_optimization = [3] is not a mapping" in text
    assert got.plan.method.precision.compute_dtype == "bf16"
    _reopens(got.plan, tmp_path)


def test_a_zero_seq_len_in_a_toml_warns_instead_of_taking_the_base_plans(tmp_path: Path) -> None:
    toml = "[training]\nseq_len = 0\nlocal_batch_size = 2\n"
    got = _import(_write(tmp_path, "job.toml", toml))
    # torchtitan's JobConfig default seq_len is 2048 (the file's value, not the plan's)
    assert "training.seq_len = 0 is below 1: torchtitan's default 2048 used instead" in got.warnings
    assert got.plan.batch.seq_len == 2048 and got.plan.batch.micro_batch == 2


@pytest.mark.parametrize(
    ("toml", "words"),
    [
        ("[parallelism]\ntensor_parallel_degree = inf\n", "tensor_parallel_degree = inf"),
        ("[training]\nseq_len = nan\n", "seq_len = nan"),
        ("a = " + "[" * 1000 + "]" * 1000 + "\n", "more than 64 levels"),  # RecursionError
    ],
)
def test_toml_values_no_plan_holds_are_refused(tmp_path: Path, toml: str, words: str) -> None:
    assert words in _refused(_write(tmp_path, "job.toml", toml))


def test_a_section_of_the_wrong_type_in_toml_or_yaml_is_named(tmp_path: Path) -> None:
    got = _import(_write(tmp_path, "job.toml", "training = 3\n[parallelism]\n"))
    assert "[training] is not a table of settings: not read" in got.warnings
    yaml = "distributed_type: FSDP\nfsdp_config: 7\nnum_processes: 0\n"
    got = _import(_write(tmp_path, "acc.yaml", yaml))
    assert any(w.startswith("fsdp_config = 7 is not a mapping") for w in got.warnings)
    assert any(w.startswith("num_processes = 0 is below 1") for w in got.warnings)


# --- paths out of the folder or cache ----------------------------------------------------


def test_an_accelerate_companion_path_out_of_the_folder_is_not_followed(tmp_path: Path) -> None:
    inner = tmp_path / "job"
    inner.mkdir()
    _write(tmp_path, "ds.json", json.dumps({"zero_optimization": {"stage": 3}}))
    yaml = "distributed_type: DEEPSPEED\ndeepspeed_config:\n  deepspeed_config_file: ../ds.json\n"
    # not followed out of the folder, and the ZeRO stage is in the file: refused
    with pytest.raises(ValueError, match="deepspeed_config_file '../ds.json' is not beside it"):
        _import(_write(inner, "acc.yaml", yaml))
    _write(inner, "ds.json", json.dumps({"zero_optimization": {"stage": 3}}))
    assert _import(inner / "acc.yaml").plan.parallelism.strategy == "zero3"  # the one beside


def _cache(tmp_path: Path, ref: Callable[[Path], None]) -> dict[str, str]:
    repo = tmp_path / "hub" / "models--org--m"
    (repo / "refs").mkdir(parents=True)
    ref(repo / "refs" / "main")
    return {"HF_HUB_CACHE": str(tmp_path / "hub")}


def test_a_ref_leading_out_of_the_cache_or_at_a_fifo_is_refused(tmp_path: Path) -> None:
    env = _cache(tmp_path, lambda p: p.write_text("../../.."))
    with pytest.raises(ModelNotCachedError, match="does not hold a commit hash"):
        import_cached_model("org/m", env=env)
    env = _cache(tmp_path / "2", os.mkfifo)
    with deadline(DEADLINE_S), pytest.raises(ModelNotCachedError, match="not a regular file"):
        import_cached_model("org/m", env=env)


def test_a_snapshot_linked_out_of_the_cache_is_refused(tmp_path: Path) -> None:
    commit = "a" * 40
    env = _cache(tmp_path, lambda p: p.write_text(commit))
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    _write(outside, "config.json", json.dumps(LLAMA))
    snapshots = tmp_path / "hub" / "models--org--m" / "snapshots"
    snapshots.mkdir()
    (snapshots / commit).symlink_to(outside)
    with pytest.raises(ModelNotCachedError, match="leads outside the cache"):
        import_cached_model("org/m", env=env)


# --- safetensors headers -----------------------------------------------------------------


def _folder(tmp_path: Path, header: dict[str, object], dtype: str = "bfloat16") -> Path:
    folder = tmp_path / "model"
    folder.mkdir()
    _write(folder, "config.json", json.dumps({**LLAMA, "torch_dtype": dtype}))
    raw = json.dumps(header).encode()
    (folder / "model.safetensors").write_bytes(struct.pack("<Q", len(raw)) + raw)
    return folder


def test_a_shape_of_50000_dimensions_is_refused_before_it_is_multiplied(tmp_path: Path) -> None:
    shape = [2**40] * 50_000  # the product is a 600,000-digit integer: 31 s before
    folder = _folder(tmp_path, {"w": {"dtype": "BF16", "shape": shape, "data_offsets": [0, 0]}})
    assert "has 50,000 dimensions (at most 64)" in _refused(folder)


def test_dtype_auto_does_not_swallow_a_corrupt_header(tmp_path: Path) -> None:
    folder = tmp_path / "model"
    folder.mkdir()
    _write(folder, "config.json", json.dumps({**LLAMA, "torch_dtype": "auto"}))
    (folder / "model.safetensors").write_bytes(struct.pack("<Q", 5) + b"{oops")
    assert "model.safetensors's header is not valid JSON" in _refused(folder)


def test_dtype_auto_without_weights_is_a_warned_guess(tmp_path: Path) -> None:
    got = _import(_write(tmp_path, "config.json", json.dumps({**LLAMA, "torch_dtype": "auto"})))
    assert "torch_dtype 'auto' with no weights to read: assumed bfloat16" in got.warnings
    assert got.plan.model.architecture.stored_dtype == "bf16"


def test_a_fifo_named_model_safetensors_does_not_block(tmp_path: Path) -> None:
    folder = tmp_path / "model"
    folder.mkdir()
    _write(folder, "config.json", json.dumps(LLAMA))
    os.mkfifo(folder / "model.safetensors")
    assert "model.safetensors is not a regular file" in _refused(folder)


# --- the command line ------------------------------------------------------------------


def test_cli_import_prints_one_sentence_for_a_plan_field_out_of_range(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 39: cmd_import caught pydantic's ValidationError as a ValueError first, so
    its multi-line text (with a URL) reached the terminal; the importer now words it."""
    src = _write(tmp_path, "ds_config.json", json.dumps({"aio": {"block_size": -5}}))
    assert main(["import", str(src), "-o", str(tmp_path / "out.memplan")]) == EXIT_BAD_PLAN
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "https://" not in err and len(err) <= 300
    assert "ds_config.json: the plan it makes is invalid: offload.aio_block_size" in err
    assert not (tmp_path / "out.memplan").exists()


def test_cli_import_writes_a_plan_that_reopens(tmp_path: Path) -> None:
    src = _write(tmp_path, "job.toml", "[training]\nseq_len = 2048\nlocal_batch_size = 0\n")
    out = tmp_path / "out.memplan"
    assert main(["import", str(src), "-o", str(out)]) == 0
    # local_batch_size 0 is unusable: torchtitan's JobConfig default 8 is taken, warned
    assert load(out).plan.batch.seq_len == 2048 and load(out).plan.batch.micro_batch == 8


# --- work bounded by the file, not by what it asks for ----------------------------------


@pytest.mark.parametrize(
    ("name", "text", "words"),
    [
        # ast.parse takes seconds on half a million statements and cannot be interrupted
        ("recipe.py", "x\n" * 20_000, "has 20,000 lines; no torchtitan recipe"),
        ("recipe.py", "config.training.seq_len = " + "1;" * 100_000, "over 128 KiB is not read"),
        ("acc.yaml", "a: 1\n" * 20_000, "has 20,000 lines"),
        # shlex is quadratic in a token's length: a megabyte-long argument took minutes
        ("train.sh", 'pretrain_gpt.py --num-layers "' + "x" * 50_000 + '"', "at most 40,000"),
    ],
)
def test_files_too_big_for_their_parsers_are_refused(
    tmp_path: Path, name: str, text: str, words: str
) -> None:
    assert words in _refused(_write(tmp_path, name, text))
