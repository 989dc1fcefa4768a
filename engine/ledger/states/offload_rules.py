"""The strategy families the offload split asks, kept here only for its importers.

The offload rules themselves moved to :mod:`engine.legality.offload`; this module
goes once ``host.py``, ``transfers.py`` and ``offload.py`` ask the strategy-family
table instead.
"""

from __future__ import annotations

from engine.legality.offload import DEEPSPEED, FSDP

__all__ = ["DEEPSPEED", "FSDP"]
