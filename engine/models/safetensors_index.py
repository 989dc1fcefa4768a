"""Exact stored counts from safetensors headers, without reading a single weight.

A safetensors file starts with an 8-byte little-endian header length N, then N bytes of
JSON mapping each tensor name to its dtype, shape and byte range. Reading those
``8 + N`` bytes (and the file size, to check the ranges) is all an import needs, so a
100 GB shard imports in milliseconds. Sharded checkpoints list their shards in
``model.safetensors.index.json``. Anything malformed raises :class:`SafetensorsError`
with a sentence naming the file and the problem; nothing here should ever crash.
"""

from __future__ import annotations

import os
import stat
import struct
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.errors import quote
from engine.fileio.bounded_read import inside, read_text
from engine.fileio.strict_json import MAX_FILE_BYTES, loads_config
from engine.models.inventory import build_inventory
from engine.models.mtp import unbuilt_stored_names
from engine.models.spec import ArchitectureSpec

# The format caps the header at 100 MB; a bigger length means a corrupt or foreign file.
MAX_HEADER_BYTES = 100_000_000

MAX_DIMS = 64
"""The most dimensions a tensor's shape may list (PyTorch's own cap on a tensor's rank);
a longer shape is refused before its size is multiplied out."""

MAX_DIM = 2**63 - 1
"""The largest single dimension (safetensors stores them as 64-bit integers)."""

ITEM_BYTES: dict[str, int] = {
    "F64": 8,
    "I64": 8,
    "U64": 8,
    "F32": 4,
    "I32": 4,
    "U32": 4,
    "F16": 2,
    "BF16": 2,
    "I16": 2,
    "U16": 2,
    "I8": 1,
    "U8": 1,
    "BOOL": 1,
    "F8_E4M3": 1,
    "F8_E5M2": 1,
    "F8_E8M0": 1,
}

# Our stored-dtype names → safetensors dtype strings.
ST_DTYPE: dict[str, str] = {"fp32": "F32", "bf16": "BF16", "fp16": "F16", "fp8_e4m3": "F8_E4M3"}

# Stored tensors that are not parameters: FP8 block scales, causal-mask and rotary buffers.
_AUX_SUFFIXES = (
    "weight_scale_inv",
    ".attn.bias",
    ".attn.masked_bias",
    ".attention.bias",
    ".attention.masked_bias",
    "rotary_emb.inv_freq",
)


class SafetensorsError(ValueError):
    """A safetensors file or index that cannot be read; the message names the file."""


@dataclass(frozen=True, slots=True)
class StoredTensor:
    """One tensor entry of a safetensors header."""

    name: str
    dtype: str  # safetensors spelling: "BF16", "F32", "F8_E4M3", …
    shape: tuple[int, ...]
    file: str

    @property
    def numel(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return n

    @property
    def auxiliary(self) -> bool:
        """Stored but not a parameter (FP8 scales, mask and rotary buffers)."""
        return self.name.endswith(_AUX_SUFFIXES)


@dataclass(frozen=True, slots=True)
class StoredInventory:
    """Every tensor found in a checkpoint's headers."""

    tensors: tuple[StoredTensor, ...]
    files: tuple[str, ...]
    index_total_size: int | None  # bytes claimed by the index's metadata, if any

    @property
    def total(self) -> int:
        """All stored elements, auxiliary tensors included (what hub pages show)."""
        return sum(t.numel for t in self.tensors)

    @property
    def parameters(self) -> int:
        """Stored elements that are parameters."""
        return sum(t.numel for t in self.tensors if not t.auxiliary)

    @property
    def by_dtype(self) -> dict[str, int]:
        """Elements per safetensors dtype, auxiliary tensors included."""
        out: dict[str, int] = defaultdict(int)
        for t in self.tensors:
            out[t.dtype] += t.numel
        return dict(out)

    @property
    def nbytes(self) -> int:
        return sum(t.numel * ITEM_BYTES.get(t.dtype, 0) for t in self.tensors)


def _entry(path: Path, name: str, raw: Any, data_len: int) -> StoredTensor:
    where = f"{path.name}: tensor {quote(name)}"
    if not isinstance(raw, dict):
        raise SafetensorsError(f"{where} has a header entry that is not an object")
    dtype, shape, offsets = raw.get("dtype"), raw.get("shape"), raw.get("data_offsets")
    if not isinstance(dtype, str):
        raise SafetensorsError(f"{where} has no dtype")
    if isinstance(shape, list) and len(shape) > MAX_DIMS:
        raise SafetensorsError(f"{where} has {len(shape):,} dimensions (at most {MAX_DIMS})")
    if not isinstance(shape, list) or not all(
        isinstance(d, int) and not isinstance(d, bool) and 0 <= d <= MAX_DIM for d in shape
    ):
        raise SafetensorsError(f"{where} has an invalid shape {quote(shape)}")
    if (
        not isinstance(offsets, list)
        or len(offsets) != 2
        or not all(isinstance(o, int) and not isinstance(o, bool) for o in offsets)
        or not 0 <= offsets[0] <= offsets[1]
    ):
        raise SafetensorsError(f"{where} has invalid data_offsets {quote(offsets)}")
    t = StoredTensor(name, dtype, tuple(shape), path.name)
    if offsets[1] > data_len:
        raise SafetensorsError(
            f"{where} ends at byte {offsets[1]} of a data section of only {data_len} bytes; "
            "the file is truncated"
        )
    item = ITEM_BYTES.get(dtype)
    if item is not None and offsets[1] - offsets[0] != t.numel * item:
        raise SafetensorsError(
            f"{where} spans {offsets[1] - offsets[0]} bytes but {dtype}{list(shape)} "
            f"needs {t.numel * item}"
        )
    return t


def _header_bytes(p: Path, within: Path | None) -> tuple[bytes, int]:
    """(header bytes, data-section length) of a regular file, read without blocking on a
    pipe or a device and without reading past the header."""
    if within is not None and not inside(p, within):
        raise SafetensorsError(f"{p.name} leads outside {within.name}; not read")
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0)
    try:
        fd = os.open(p, flags)
    except OSError as exc:
        raise SafetensorsError(f"cannot read {p.name}: {exc.strerror or exc}") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise SafetensorsError(f"{p.name} is not a regular file (a folder, device or pipe)")
        size = info.st_size
        with os.fdopen(os.dup(fd), "rb") as f:
            prefix = f.read(8)
            if len(prefix) < 8:
                raise SafetensorsError(
                    f"{p.name} is {size} bytes, too short for a safetensors header"
                )
            (n,) = struct.unpack("<Q", prefix)
            if n > MAX_HEADER_BYTES:
                raise SafetensorsError(
                    f"{p.name} declares a {n:,}-byte header (over the format's 100 MB limit); "
                    "the file is corrupt or not safetensors"
                )
            if n > MAX_FILE_BYTES:
                raise SafetensorsError(
                    f"{p.name} declares a {n:,}-byte header, over the 16 MiB MemPlan reads "
                    "(a shard of 100,000 tensors needs about 10 MiB)"
                )
            if 8 + n > size:
                raise SafetensorsError(
                    f"{p.name} declares a {n:,}-byte header but holds only {size - 8:,} bytes "
                    "after the length; the file is truncated"
                )
            raw = f.read(n)
    except OSError as exc:
        raise SafetensorsError(f"cannot read {p.name}: {exc.strerror or exc}") from None
    finally:
        os.close(fd)
    return raw, size - 8 - n


def read_header(path: str | Path, within: Path | None = None) -> tuple[StoredTensor, ...]:
    """The tensors one ``.safetensors`` file declares, from its header alone (parsed with
    the plan loader's JSON limits; ``within``: a folder the file must resolve inside)."""
    p = Path(path)
    raw, data_len = _header_bytes(p, within)
    try:
        header = loads_config(raw.decode("utf-8"), f"{p.name}'s header")
    except UnicodeDecodeError:
        raise SafetensorsError(
            f"{p.name} has a header that is not valid JSON (not UTF-8 text)"
        ) from None
    except ValueError as exc:  # strict_json.ConfigFileError: names the key
        raise SafetensorsError(str(exc)) from None
    if not isinstance(header, dict):
        raise SafetensorsError(f"{p.name} has a header that is not a JSON object")
    return tuple(
        _entry(p, name, entry, data_len) for name, entry in header.items() if name != "__metadata__"
    )


def _read_index(index: Path, within: Path | None) -> tuple[dict[str, str], int | None]:
    try:
        doc = loads_config(read_text(index, within=within), index.name)
    except ValueError as exc:  # FileRefused / ConfigFileError: one sentence naming it
        raise SafetensorsError(str(exc)) from None
    wmap = doc.get("weight_map") if isinstance(doc, dict) else None
    if not isinstance(wmap, dict) or not all(isinstance(v, str) for v in wmap.values()):
        raise SafetensorsError(f"{index.name} has no valid 'weight_map' object")
    meta = doc.get("metadata")
    total = meta.get("total_size") if isinstance(meta, dict) else None
    return wmap, total if isinstance(total, int) else None


def read_checkpoint(folder: str | Path, within: Path | None = None) -> StoredInventory:
    """Every tensor of a local model folder, from ``model.safetensors`` or the index.

    With an index, every shard it names is read, and a tensor the index places in a
    shard that does not declare it is an error (a mismatched or partial download). A
    shard is named by a plain file name in the folder: never a path out of it.
    """
    root = Path(folder)
    index = root / "model.safetensors.index.json"
    single = root / "model.safetensors"
    if index.exists():
        wmap, total_size = _read_index(index, within)
        tensors: list[StoredTensor] = []
        files = sorted(set(wmap.values()))
        for shard in files:
            shard_path = root / shard
            if Path(shard).name != shard or shard in ("", ".", "..") or not shard_path.exists():
                raise SafetensorsError(
                    f"{index.name} names the shard {quote(shard)}, which is missing"
                )
            tensors.extend(read_header(shard_path, within))
        declared = {t.name: t.file for t in tensors}
        for name, shard in wmap.items():
            if declared.get(name) != shard:
                raise SafetensorsError(
                    f"{index.name} places tensor {quote(name)} in {quote(shard)}, "
                    "whose header lacks it"
                )
        return StoredInventory(tuple(tensors), tuple(files), total_size)
    if single.exists():
        return StoredInventory(read_header(single, within), (single.name,), None)
    raise SafetensorsError(
        f"{root.name or root} holds neither model.safetensors nor model.safetensors.index.json"
    )


@dataclass(frozen=True, slots=True)
class CrossCheck:
    """Computed inventory versus stored checkpoint."""

    computed_total: int
    stored_parameters: int  # auxiliary tensors and unbuilt copies excluded
    stored_auxiliary: int
    stored_unbuilt: int  # stored by design but not parameters (MTP copies, untrained MTP)
    computed_by_dtype: dict[str, int]  # safetensors dtype spelling
    stored_by_dtype: dict[str, int]  # auxiliary tensors excluded
    missing: tuple[str, ...]  # computed names the checkpoint lacks
    unexpected: tuple[str, ...]  # stored parameter names the spec does not produce
    shape_mismatches: tuple[tuple[str, tuple[int, ...], tuple[int, ...]], ...]

    @property
    def ok(self) -> bool:
        return (
            self.computed_total == self.stored_parameters
            and not self.missing
            and not self.unexpected
            and not self.shape_mismatches
        )

    def messages(self) -> list[str]:
        """One sentence per mismatch, for the user; empty when everything agrees."""
        out: list[str] = []
        if self.computed_total != self.stored_parameters:
            diff = self.stored_parameters - self.computed_total
            out.append(
                f"the config gives {self.computed_total:,} parameters but the checkpoint "
                f"stores {self.stored_parameters:,} ({diff:+,})"
            )
        for dt in sorted(set(self.computed_by_dtype) | set(self.stored_by_dtype)):
            c, s = self.computed_by_dtype.get(dt, 0), self.stored_by_dtype.get(dt, 0)
            if c != s:
                out.append(f"{dt}: computed {c:,} elements, stored {s:,}")
        if self.missing:
            out.append(
                f"{len(self.missing)} computed tensors are not stored, "
                f"e.g. {_short(self.missing[0])}"
            )
        if self.unexpected:
            out.append(
                f"{len(self.unexpected)} stored tensors are not in the config's "
                f"inventory, e.g. {_short(self.unexpected[0])}"
            )
        for name, want, got in self.shape_mismatches[:5]:
            out.append(f"{_short(name)}: computed shape {list(want)}, stored {quote(list(got))}")
        return out


def _short(name: str) -> str:
    """A tensor name from a header, shortened and escaped for a message."""
    return name if len(name) <= 80 and name.isprintable() else quote(name)


def _strip_prefix(names: set[str], stored: dict[str, StoredTensor]) -> dict[str, StoredTensor]:
    """Match checkpoints saved from a wrapper (``transformer.h.0`` vs ``h.0``)."""
    if names & stored.keys():
        return stored
    for prefix in ("transformer.", "model."):
        trimmed = {k.removeprefix(prefix): v for k, v in stored.items()}
        if names & trimmed.keys():
            return trimmed
    return stored


def cross_check(spec: ArchitectureSpec, stored: StoredInventory) -> CrossCheck:
    """Compare the spec's inventory with what the checkpoint stores, tensor by tensor."""
    inv = build_inventory(spec)
    computed = {t.name: t for t in inv}
    params = {t.name: t for t in stored.tensors if not t.auxiliary}
    params = _strip_prefix(set(computed), params)
    unbuilt = set(unbuilt_stored_names(spec, params))
    unbuilt_total = sum(params[n].numel for n in unbuilt)
    params = {n: t for n, t in params.items() if n not in unbuilt}
    c_dtype: dict[str, int] = defaultdict(int)
    for t in inv:
        c_dtype[ST_DTYPE[t.dtype]] += t.numel
    s_dtype: dict[str, int] = defaultdict(int)
    for st in params.values():
        s_dtype[st.dtype] += st.numel
    mismatches = tuple(
        (n, t.stored_shape, params[n].shape)
        for n, t in computed.items()
        if n in params and params[n].shape != t.stored_shape
    )
    return CrossCheck(
        computed_total=sum(t.numel for t in inv),
        stored_parameters=sum(t.numel for t in params.values()),
        stored_auxiliary=sum(t.numel for t in stored.tensors if t.auxiliary),
        stored_unbuilt=unbuilt_total,
        computed_by_dtype=dict(c_dtype),
        stored_by_dtype=dict(s_dtype),
        missing=tuple(n for n in computed if n not in params),
        unexpected=tuple(sorted(n for n in params if n not in computed)),
        shape_mismatches=mismatches,
    )
