"""How precisely a published figure was printed, and so how wide it really is.

A run that prints "8.5 GiB" measured something in [8.45, 8.55) GiB: the last printed
digit is the measurement's resolution as published (torchtune's README table rounds
``peak_memory_active`` to 0.1 GiB, torchtitan's log to 0.01 GiB, Answer.AI's train.py
to 0.01 GiB, LitGPT's finetune log to 0.01 GB). Comparing MemPlan's range with the
printed point instead of this interval would call a case outside for a difference
the publication cannot show. Only a single printed figure (``low_gib == high_gib``)
in GiB or GB gets the half step; a published range already states its own width.
"""

from __future__ import annotations

import re

_GIB = 2**30
_PRINTED = re.compile(r"^\s*(\d[\d,]*)(?:\.(\d+))?\s*(GiB|GB)\b")
_UNIT_BYTES = {"GiB": _GIB, "GB": 10**9}


def half_step_gib(as_published: str, low_gib: float | None, high_gib: float | None) -> float:
    """Half a unit of the last printed digit, in GiB, or 0.0 where the figure is a
    range, is not printed in GiB / GB at the start, or is missing."""
    if low_gib is None or high_gib is None or low_gib != high_gib:
        return 0.0
    match = _PRINTED.match(as_published)
    if match is None:
        return 0.0
    decimals = len(match.group(2) or "")
    step_bytes = _UNIT_BYTES[match.group(3)] * 10.0**-decimals
    return step_bytes / 2 / _GIB
