"""What a plan field looks like to the user, read from its pydantic metadata.

The input tabs are generated from these specs, so a new plan field appears in the GUI
with its description, bounds, choices, unit and default without new widget code.
Parsing of typed text ("80 GB", "79.1 GiB", "auto") lives here too, free of Qt, so it
can be tested on its own.
"""

from __future__ import annotations

import math
import re
import types
import typing
from dataclasses import dataclass
from typing import Any, Literal

from annotated_types import Ge, Gt, Le, Lt
from pydantic import BaseModel
from pydantic.fields import FieldInfo

from engine.errors import quote
from engine.fileio.number_text import not_a_number, number_from_text
from engine.units import GB, GiB, MiB

Kind = Literal["bool", "choice", "int", "float", "bytes", "text", "list", "json", "section"]

_UNIT_WORDS = (
    "bytes",
    "tokens",
    "count",
    "ranks",
    "elements",
    "GB/s",
    "%",
    "seconds",
    "MiB",
    "sequences",
)


@dataclass(frozen=True)
class FieldSpec:
    """One editable leaf (or nested section) of the plan."""

    path: str
    name: str
    label: str
    kind: Kind
    description: str
    default: Any
    optional: bool
    choices: tuple[Any, ...] = ()
    lower: float | None = None
    upper: float | None = None
    unit: str = ""
    model: type[BaseModel] | None = None  # for kind == "section"

    def tooltip(self) -> str:
        bits = [f"<b>{self.path}</b>"]
        if self.description:
            bits.append(self.description)
        bits.append(f"Default: {format_default(self)}")
        if self.lower is not None or self.upper is not None:
            lo = "" if self.lower is None else f"{self.lower:g} ≤ "
            hi = "" if self.upper is None else f" ≤ {self.upper:g}"
            bits.append(f"Allowed: {lo}value{hi}")
        return "<br>".join(bits)


def _label(name: str) -> str:
    if name.endswith("_mb"):  # the unit column says MiB (:func:`_unit`)
        name = name[: -len("_mb")]
    words = name.replace("_bytes", "").replace("_gbps", "").split("_")
    fixed = {
        "tp": "TP",
        "pp": "PP",
        "cp": "CP",
        "ep": "EP",
        "dp": "DP",
        "hbm": "HBM",
        "ds": "DeepSpeed",
        "fsdp": "FSDP",
        "fsdp1": "FSDP1",
        "ddp": "DDP",
        "kv": "KV",
        "qkv": "QKV",
        "mlp": "MLP",
        "lm": "LM",
        "os": "OS",
        "nvme": "NVMe",
        "aio": "AIO",
        "mb": "MB",
        "cuda": "CUDA",
        "nccl": "NCCL",
        "cublas": "cuBLAS",
        "mtp": "MTP",
        "ram": "RAM",
        "gpus": "GPUs",
        "qk": "QK",
        "o": "O",
    }
    out = [fixed.get(w, w) for w in words if w]
    text = " ".join(out)
    return text[:1].upper() + text[1:]


def _unit(name: str, description: str) -> str:
    if name.endswith("_bytes") or name.endswith("_bytes_per_node") or "(bytes)" in description:
        return "bytes"
    if name.endswith("_gbps"):
        return "GB/s"
    if name.endswith("_mb"):  # PyTorch's and DeepSpeed's *_mb settings count MiB (2**20)
        return "MiB"
    for match in reversed(re.findall(r"\(([^()]{1,24})\)", description)):
        for word in _UNIT_WORDS:
            if match == word or match.startswith(word):
                return word
    return ""


def _strip_optional(tp: Any) -> tuple[Any, bool]:
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        optional = len(args) < len(typing.get_args(tp))
        if len(args) == 1:
            return args[0], optional
        return tp, optional
    return tp, False


def _kind(tp: Any, unit: str) -> tuple[Kind, tuple[Any, ...]]:
    origin = typing.get_origin(tp)
    if origin is Literal:
        return "choice", typing.get_args(tp)
    if origin in (tuple, list):
        inner = typing.get_args(tp)[0] if typing.get_args(tp) else str
        choices = typing.get_args(inner) if typing.get_origin(inner) is Literal else ()
        return "list", choices
    if origin in (typing.Union, types.UnionType):
        return "json", ()
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        return "section", ()
    if tp is bool:
        return "bool", ()
    if tp is int:
        return ("bytes" if unit == "bytes" else "int"), ()
    if tp is float:
        return "float", ()
    return "text", ()


def _bounds(info: FieldInfo) -> tuple[float | None, float | None]:
    lower = upper = None
    for meta in info.metadata:
        if isinstance(meta, Ge | Gt):
            lower = float(meta.ge if isinstance(meta, Ge) else meta.gt)  # type: ignore[arg-type]
        if isinstance(meta, Le | Lt):
            upper = float(meta.le if isinstance(meta, Le) else meta.lt)  # type: ignore[arg-type]
    return lower, upper


def field_specs(model: type[BaseModel], prefix: str) -> list[FieldSpec]:
    """The specs of a section's fields, in declaration order (nested sections included)."""
    specs = []
    for name, info in model.model_fields.items():
        tp, optional = _strip_optional(info.annotation)
        description = info.description or ""
        unit = _unit(name, description)
        kind, choices = _kind(tp, unit)
        lower, upper = _bounds(info)
        default = None if info.is_required() else info.get_default(call_default_factory=True)
        if isinstance(default, BaseModel):
            default = default.model_dump(mode="json")
        specs.append(
            FieldSpec(
                path=f"{prefix}.{name}",
                name=name,
                label=_label(name),
                kind=kind,
                description=description,
                default=default,
                optional=optional,
                choices=choices,
                lower=lower,
                upper=upper,
                unit=unit,
                model=tp if kind == "section" else None,
            )
        )
    return specs


CHOICE_NAMES: dict[str, str] = {"lora": "LoRA", "qlora": "QLoRA"}
"""How a choice reads on screen where its value in the file is not the proper name (the
training methods); the plan keeps the value."""


def choice_text(value: Any) -> str:
    """A choice as the window shows it: "QLoRA" for ``qlora``, other values as they are."""
    return CHOICE_NAMES.get(str(value), str(value))


def format_default(spec: FieldSpec) -> str:
    value = spec.default
    if value is None:
        return "auto" if spec.optional else "none (required)"
    if spec.kind == "bytes" and isinstance(value, int):
        return f"{value:,} B ({value / GB:,.2f} GB / {value / GiB:,.2f} GiB)"
    if isinstance(value, (list, tuple)):
        return ", ".join(str(v) for v in value) or "(none)"
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:,}"
    return str(value)


_BYTE_UNITS = {
    "b": 1,
    "kb": 10**3,
    "mb": 10**6,
    "gb": GB,
    "tb": 10**12,
    "kib": 2**10,
    "mib": MiB,
    "gib": GiB,
    "tib": 2**40,
}


def parse_bytes(text: str, default_unit: str = "gb") -> int:
    """Parse "80 GB", "79.1 GiB", "80e9" or "1,024 MiB" into bytes.

    A bare number is read in ``default_unit`` (the unit the field shows), except an
    integer of at least a million, which is taken as bytes.
    """
    cleaned = text.strip().replace(",", "").replace("_", "")
    match = re.fullmatch(r"([0-9.eE+-]+)\s*([A-Za-z]*)", cleaned)
    if not match:
        raise ValueError(f"enter a size such as 80 GB or 79.1 GiB (got {quote(text)})")
    number, unit = match.group(1), match.group(2).lower()
    try:
        value = float(number)
    except ValueError:
        raise ValueError(f"not a number: {quote(number)}") from None
    if not math.isfinite(value):
        raise ValueError(f"too large a size: {quote(text)}")
    if not unit:
        unit = "b" if value >= 1e6 and float(value).is_integer() else default_unit
    if unit not in _BYTE_UNITS:
        raise ValueError(f"unknown unit {quote(unit)}: use B, GB, GiB, TB, TiB, MB or MiB")
    return round(value * _BYTE_UNITS[unit])


def _short(value: int, scale: int, max_digits: int) -> str | None:
    for digits in range(max_digits + 1):
        text = f"{value / scale:.{digits}f}"
        if round(float(text) * scale) == value:
            return text
    return None


def format_bytes_field(value: int, unit: str) -> str:
    """Text for a byte field that parses back to exactly ``value``.

    Prefers the user's unit with few decimals, then the other unit, then more decimals,
    and falls back to plain bytes, so showing a value never changes it.
    """
    if value < 10**6:
        return f"{value} B"
    units = [(GiB, "GiB"), (GB, "GB")] if unit == "gib" else [(GB, "GB"), (GiB, "GiB")]
    for max_digits in (4, 9):
        for scale, name in units:
            text = _short(value, scale, max_digits)
            if text is not None:
                return f"{text} {name}"
    return f"{value} B"


def parse_number(text: str, kind: Kind, optional: bool) -> int | float | None:
    """Parse a typed int/float as ``--set`` does (``engine.fileio.number_text``: "8,192",
    "8k"); empty means None for optional fields."""
    cleaned = text.strip()
    if not cleaned or cleaned.lower() in ("auto", "none"):
        if optional:
            return None
        raise ValueError("a value is required")
    value = number_from_text(cleaned)
    if value is None or (kind == "int" and not isinstance(value, int)):
        raise ValueError(not_a_number(text, kind == "int"))
    return value if kind == "int" else float(value)


def parse_list(text: str) -> list[Any]:
    """Comma-separated items; whole numbers become ints (pp_layer_split)."""
    items = [t.strip() for t in text.split(",") if t.strip()]
    return [int(t) if t.lstrip("-").isdigit() else t for t in items]


def parse_json_like(text: str) -> Any:
    """true/false, a number, empty (None) or a word, for union fields like bool | int."""
    cleaned = text.strip().lower()
    if cleaned in ("", "auto", "none"):
        return None
    if cleaned in ("true", "yes", "on"):
        return True
    if cleaned in ("false", "no", "off"):
        return False
    try:
        return int(cleaned)
    except ValueError:
        return text.strip()
