"""What every trace implementation checks before it runs, and the library versions its
record names — one copy for the HF, torchtitan, Megatron-Core and DeepSpeed runners."""

from __future__ import annotations

import platform
from importlib import metadata

import torch

from engine.plan import Plan
from engine.trace.errors import TraceRefused


def checked_rank(plan: Plan, reason: str | None, steps: int, rank: int | None) -> int:
    """The rank to trace, after the implementation's own refusal ``reason``, the two
    steps a trace needs and the plan's world. Rank 0 unless one is asked for: FSDP2's
    dim-0 chunks give the first ranks the larger pieces, so rank 0 is the heaviest of the
    one pipeline stage a trace runs."""
    if reason is not None:
        raise TraceRefused(reason)
    if steps < 2:
        raise TraceRefused("a trace needs at least 2 steps: the first creates optimizer state")
    world = plan.parallelism.world_size
    chosen = 0 if rank is None else rank
    if not 0 <= chosen < world:
        raise TraceRefused(f"rank {chosen} is not in the plan's world of {world} ranks")
    return chosen


def trace_versions(*distributions: str) -> dict[str, str]:
    """torch, the named installed distributions and Python, as a trace record names them."""
    found = {name: metadata.version(name) for name in distributions}
    return {"torch": str(torch.__version__), **found, "python": platform.python_version()}
