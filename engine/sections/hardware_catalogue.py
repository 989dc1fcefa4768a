"""The accelerator and node catalogue (``resources/hardware/accelerators.json``), read once.

The Hardware section validates ``hardware.accelerator`` against the catalogue's keys and
``engine.presets`` builds its presets from the same document, so the file is parsed in one
place and neither depends on the other.
"""

from __future__ import annotations

import json
from functools import cache
from importlib import resources
from typing import Any

CUSTOM_ACCELERATOR = "custom"
"""The ``hardware.accelerator`` value for hardware not in the catalogue: the capacities and
bandwidths are whatever the plan holds, and nothing is inferred from the name."""


@cache
def catalogue() -> dict[str, Any]:
    """The parsed catalogue document (accelerators and nodes)."""
    text = (
        resources.files("resources")
        .joinpath("hardware", "accelerators.json")
        .read_text(encoding="utf-8")
    )
    data: dict[str, Any] = json.loads(text)
    return data


@cache
def accelerator_keys() -> tuple[str, ...]:
    """Every accelerator key in catalogue order, then :data:`CUSTOM_ACCELERATOR`."""
    return (*(str(item["key"]) for item in catalogue()["accelerators"]), CUSTOM_ACCELERATOR)
