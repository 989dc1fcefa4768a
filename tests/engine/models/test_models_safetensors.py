"""Header-only safetensors import on small files the tests write themselves."""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Any

import pytest

from engine.models.importer import import_model_folder
from engine.models.inventory import build_inventory
from engine.models.safetensors_index import (
    SafetensorsError,
    cross_check,
    read_checkpoint,
    read_header,
)
from engine.models.spec import ArchitectureSpec
from tests.engine.models.test_models_inventory import TINY_DSV3

_BYTES = {"BF16": 2, "F32": 4, "F16": 2}

TINY = ArchitectureSpec(
    family="llama",
    hidden=8,
    layers=2,
    heads=2,
    kv_heads=1,
    intermediate=4,
    vocab=6,
    tied_embeddings=True,
)


def write_safetensors(
    path: Path,
    tensors: dict[str, tuple[str, tuple[int, ...]]],
    header_extra: dict[str, Any] | None = None,
) -> None:
    """A valid safetensors file: length, JSON header, zero-filled data."""
    header: dict[str, Any] = {"__metadata__": {"format": "pt"}}
    offset = 0
    for name, (dtype, shape) in tensors.items():
        n = _BYTES[dtype]
        for d in shape:
            n *= d
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [offset, offset + n]}
        offset += n
    header.update(header_extra or {})
    raw = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + bytes(offset))


def tiny_tensors() -> dict[str, tuple[str, tuple[int, ...]]]:
    return {t.name: ("BF16", t.shape) for t in build_inventory(TINY)}


def test_single_file_counts_per_dtype(tmp_path: Path) -> None:
    """Per-dtype counts come from shapes: BF16 2·3 = 6 and F32 5 elements."""
    f = tmp_path / "model.safetensors"
    write_safetensors(f, {"a": ("BF16", (2, 3)), "b": ("F32", (5,))})
    inv = read_checkpoint(tmp_path)
    assert inv.by_dtype == {"BF16": 6, "F32": 5}
    assert inv.total == inv.parameters == 11 and inv.nbytes == 12 + 20


def test_sharded_index_and_cross_check(tmp_path: Path) -> None:
    """Two shards + index; config and headers agree exactly, tensor by tensor."""
    tensors = tiny_tensors()
    names = list(tensors)
    half = len(names) // 2
    shards = {
        "model-00001-of-00002.safetensors": names[:half],
        "model-00002-of-00002.safetensors": names[half:],
    }
    for shard, members in shards.items():
        write_safetensors(tmp_path / shard, {n: tensors[n] for n in members})
    weight_map = {n: s for s, members in shards.items() for n in members}
    total = sum(t.numel for t in build_inventory(TINY))
    (tmp_path / "model.safetensors.index.json").write_text(
        json.dumps({"metadata": {"total_size": 2 * total}, "weight_map": weight_map})
    )
    (tmp_path / "config.json").write_text(
        json.dumps(
            {
                "model_type": "llama",
                "hidden_size": 8,
                "num_hidden_layers": 2,
                "num_attention_heads": 2,
                "num_key_value_heads": 1,
                "intermediate_size": 4,
                "vocab_size": 6,
                "tie_word_embeddings": True,
                "torch_dtype": "bfloat16",
            }
        )
    )
    result = import_model_folder(tmp_path)
    assert result.stored is not None and result.check is not None
    assert result.stored.files == tuple(sorted(shards))
    assert result.stored.index_total_size == 2 * total == result.stored.nbytes
    assert result.check.ok and result.check.messages() == []
    assert result.check.stored_by_dtype == {"BF16": total}


def test_cross_check_reports_mismatch(tmp_path: Path) -> None:
    """A checkpoint with one extra layer-norm and a wider MLP is reported, not hidden."""
    tensors = tiny_tensors()
    tensors["model.layers.0.mlp.up_proj.weight"] = ("BF16", (5, 8))
    tensors["extra.norm.weight"] = ("BF16", (8,))
    del tensors["model.norm.weight"]
    tensors["model.layers.0.self_attn.rotary_emb.inv_freq"] = ("F32", (2,))  # not a parameter
    write_safetensors(tmp_path / "model.safetensors", tensors)
    check = cross_check(TINY, read_checkpoint(tmp_path))
    assert not check.ok
    assert check.stored_parameters - check.computed_total == 8 + 8 - 8
    assert check.stored_auxiliary == 2
    assert check.missing == ("model.norm.weight",)
    assert check.unexpected == ("extra.norm.weight",)
    assert check.shape_mismatches == (("model.layers.0.mlp.up_proj.weight", (4, 8), (5, 8)),)
    text = " ".join(check.messages())
    assert "stores" in text and "extra.norm.weight" in text and "up_proj" in text


def _raw(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"\x01\x02", "too short"),
        (struct.pack("<Q", 1000) + b"{}", "truncated"),
        (struct.pack("<Q", 2**60), "100 MB limit"),
        (struct.pack("<Q", 5) + b"{oops", "not valid JSON"),
        (struct.pack("<Q", 4) + b"\xff\xfe\xfd\xfc", "not valid JSON"),
        (struct.pack("<Q", 2) + b"[]", "not a JSON object"),
        (struct.pack("<Q", 9) + b'{"a": 1}' + b" ", "not an object"),
    ],
)
def test_corrupt_headers_raise_clear_errors(tmp_path: Path, data: bytes, message: str) -> None:
    with pytest.raises(SafetensorsError, match=message):
        read_header(_raw(tmp_path / "bad.safetensors", data))


def test_bad_entries_and_truncated_data(tmp_path: Path) -> None:
    f = tmp_path / "m.safetensors"
    write_safetensors(f, {"w": ("BF16", (4, 4))})
    f.write_bytes(f.read_bytes()[:-1])  # lose one byte of the data section
    with pytest.raises(SafetensorsError, match="truncated"):
        read_header(f)
    write_safetensors(
        f, {"pad": ("BF16", (4,))}, {"w": {"dtype": "BF16", "shape": [2], "data_offsets": [0, 3]}}
    )
    with pytest.raises(SafetensorsError, match="needs 4"):
        read_header(f)
    write_safetensors(f, {}, {"w": {"dtype": "BF16", "shape": [-1], "data_offsets": [0, 0]}})
    with pytest.raises(SafetensorsError, match="invalid shape"):
        read_header(f)
    write_safetensors(f, {}, {"w": {"dtype": "BF16", "shape": [1], "data_offsets": [2, 0]}})
    with pytest.raises(SafetensorsError, match="data_offsets"):
        read_header(f)


def test_index_problems(tmp_path: Path) -> None:
    index = tmp_path / "model.safetensors.index.json"
    index.write_text(json.dumps({"weight_map": {"w": "missing.safetensors"}}))
    with pytest.raises(SafetensorsError, match="missing"):
        read_checkpoint(tmp_path)
    write_safetensors(tmp_path / "s.safetensors", {"x": ("BF16", (1,))})
    index.write_text(json.dumps({"weight_map": {"w": "s.safetensors"}}))
    with pytest.raises(SafetensorsError, match="whose header lacks it"):
        read_checkpoint(tmp_path)
    index.write_text("{")
    with pytest.raises(SafetensorsError, match="not valid JSON"):
        read_checkpoint(tmp_path)
    index.write_text(json.dumps({"weight_map": [1]}))
    with pytest.raises(SafetensorsError, match="weight_map"):
        read_checkpoint(tmp_path)


def test_empty_folder(tmp_path: Path) -> None:
    with pytest.raises(SafetensorsError, match=r"holds no config\.json"):
        import_model_folder(tmp_path)
    with pytest.raises(SafetensorsError, match="neither"):
        read_checkpoint(tmp_path)


def test_huge_shard_reads_header_only(tmp_path: Path) -> None:
    """A sparse 100 GB file: only the header is read, so the import is instant."""
    f = tmp_path / "model.safetensors"
    n = 50_000_000_000  # BF16 elements → 100 GB of data
    raw = json.dumps({"w": {"dtype": "BF16", "shape": [n], "data_offsets": [0, 2 * n]}}).encode()
    with f.open("wb") as fh:
        fh.write(struct.pack("<Q", len(raw)) + raw)
        fh.truncate(8 + len(raw) + 2 * n)
    assert read_checkpoint(tmp_path).by_dtype == {"BF16": n}


def test_mtp_copies_and_untrained_mtp_are_not_parameters(tmp_path: Path) -> None:
    """DeepSeek-V3 checkpoints store layer L (the MTP module) with copies of the embedding
    and head: without MTP the whole layer is set apart, with MTP only the two copies."""
    on = build_inventory(TINY_DSV3)
    stored = {t.name: ("BF16", t.shape) for t in on}
    stored["model.layers.3.embed_tokens.weight"] = ("BF16", (10, 16))
    stored["model.layers.3.shared_head.head.weight"] = ("BF16", (10, 16))
    write_safetensors(tmp_path / "model.safetensors", stored)
    inv = read_checkpoint(tmp_path)
    with_mtp = cross_check(TINY_DSV3, inv)
    assert with_mtp.ok and with_mtp.stored_unbuilt == 2 * 160
    without = cross_check(TINY_DSV3.model_copy(update={"mtp_layers": 0}), inv)
    assert without.ok and without.stored_unbuilt == 2 * 160 + 1_627
