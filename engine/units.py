"""Byte units at the edges of the engine.

The engine computes in integer bytes only; these helpers convert for display.
GB is 10^9 bytes (vendors' marketing unit) and GiB is 2^30 bytes (what
nvidia-smi and PyTorch report), and MemPlan always shows both side by side
because confusing them is a 7 % error on every H100.
"""

from __future__ import annotations

from typing import Literal

GB = 10**9
GiB = 2**30
MiB = 2**20
KiB = 2**10

UnitChoice = Literal["gb", "gib", "both"]


def ceil_div(numerator: int, denominator: int) -> int:
    """Integer ceiling division, the rounding every shard and padding rule uses."""
    if denominator <= 0:
        raise ValueError(f"divisor must be positive, got {denominator}")
    return -(-numerator // denominator)


def round_up(value: int, multiple: int) -> int:
    """Round ``value`` up to a multiple of ``multiple`` (allocator block rounding)."""
    if multiple <= 1:
        return value
    return -(-value // multiple) * multiple  # ceil_div inlined: estimates call this ~1,000×


def to_gb(n_bytes: int | float) -> float:
    return float(n_bytes) / GB


def to_gib(n_bytes: int | float) -> float:
    return float(n_bytes) / GiB


def fmt_gb(n_bytes: int | float, digits: int = 2) -> str:
    return f"{to_gb(n_bytes):,.{digits}f} GB"


def fmt_gib(n_bytes: int | float, digits: int = 2) -> str:
    return f"{to_gib(n_bytes):,.{digits}f} GiB"


def fmt_bytes(n_bytes: int | float, units: UnitChoice = "both", digits: int = 2) -> str:
    """Format a byte count in the chosen unit(s); ``both`` gives ``"x GB / y GiB"``."""
    if units == "gb":
        return fmt_gb(n_bytes, digits)
    if units == "gib":
        return fmt_gib(n_bytes, digits)
    return f"{fmt_gb(n_bytes, digits)} / {fmt_gib(n_bytes, digits)}"


def fmt_range(low: int, high: int, units: UnitChoice = "both", digits: int = 2) -> str:
    """Format a low–high range; an exact value prints once."""
    if low == high:
        return fmt_bytes(low, units, digits)
    if units == "both":
        return (
            f"{to_gb(low):,.{digits}f}–{to_gb(high):,.{digits}f} GB / "
            f"{to_gib(low):,.{digits}f}–{to_gib(high):,.{digits}f} GiB"
        )
    return f"{fmt_bytes(low, units, digits)} – {fmt_bytes(high, units, digits)}"


def fmt_count(n: int) -> str:
    """A parameter or element count with thousands separators."""
    return f"{n:,}"
