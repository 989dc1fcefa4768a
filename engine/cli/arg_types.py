"""Argument types that refuse bad numbers at parse time: ``--gpus -1`` is a usage error
(one line, exit 2) rather than a traceback from deep inside the search."""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable

MAX_GPUS = 1_000_000
"""The largest GPU count a command accepts: the Plan's own ceiling on data parallelism."""


def bounded_int(low: int, high: int) -> Callable[[str], int]:
    """An argparse type for an integer in ``low..high``."""

    def parse(text: str) -> int:
        try:
            value = int(text.strip(), 10) if len(text) <= 20 else None
        except ValueError:
            value = None
        if value is None or not low <= value <= high:
            raise argparse.ArgumentTypeError(
                f"expected a whole number from {low:,} to {high:,}, got {text[:40]!r}"
            )
        return value

    return parse


def gpu_count(text: str) -> int:
    """A number of GPUs: 1 to :data:`MAX_GPUS`."""
    return bounded_int(1, MAX_GPUS)(text)


def non_negative_float(text: str) -> float:
    """A finite number ≥ 0 (a fraction, a margin)."""
    try:
        value = float(text) if len(text) <= 40 else math.nan
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"expected a number ≥ 0, got {text[:40]!r}")
    return value
