"""The small DeepSpeed grid: Llama-shaped plans × ZeRO 1/2/3, traced against the ledger.

``python -m engine.trace.deepspeed.grid [SHAPE ...]`` traces each shape at each stage
(bf16, world 8, micro-batch 1) and prints the traced peak, the ledger's range and every
ledger group the trace does not land inside — the table of
``docs/trace-frameworks.md``. The ZeRO knobs are set so that they bite at this width
(:data:`KNOBS`): buckets below the model's size, a persistence threshold that keeps only
the norms whole, prefetch and live-parameter limits smaller than a layer.
"""

from __future__ import annotations

import sys
from typing import Any

from engine.estimate import estimate
from engine.plan import Plan, default_plan, with_values

SHAPES: dict[str, dict[str, int]] = {
    "h512-L2-v8k": {
        "hidden": 512, "layers": 2, "heads": 8, "kv_heads": 4,
        "intermediate": 1408, "vocab": 8192, "seq": 512,
    },
    "h768-L3-v16k": {
        "hidden": 768, "layers": 3, "heads": 12, "kv_heads": 4,
        "intermediate": 2048, "vocab": 16384, "seq": 1024,
    },
    "h1024-L4-v32k": {
        "hidden": 1024, "layers": 4, "heads": 16, "kv_heads": 8,
        "intermediate": 2816, "vocab": 32000, "seq": 512,
    },
}  # fmt: skip
"""Llama-shaped (SwiGLU, RMSNorm, RoPE, GQA, untied head) small models."""

KNOBS: dict[str, int] = {
    "ds_reduce_bucket_elements": 1_000_000,
    "ds_allgather_bucket_elements": 1_000_000,
    "ds_prefetch_bucket_elements": 200_000,
    "ds_param_persistence_threshold": 10_000,
    "ds_max_live_parameters": 1_000_000,
    "ds_max_reuse_distance": 1_000_000,
}
"""ZeRO knobs small enough to bite on these models (elements)."""


def grid_plan(shape: str, stage: int) -> Plan:
    """The grid's plan for ``shape`` at ZeRO ``stage`` (stack deepspeed, bf16, world 8)."""
    s = SHAPES[shape]
    arch = {k: v for k, v in s.items() if k != "seq"}
    changes: dict[str, Any] = {
        "model.preset": None,
        "model.name": f"llama-{shape}",
        **{f"model.architecture.{k}": v for k, v in arch.items()},
        "batch.seq_len": s["seq"],
        "stack.name": "deepspeed",
        "parallelism.strategy": f"zero{stage}",
        **{f"parallelism.knobs.{k}": v for k, v in KNOBS.items()},
    }
    return with_values(default_plan(), changes)


def _line(shape: str, stage: int) -> str:
    from engine.trace.compare import compare
    from engine.trace.runner import trace_plan

    plan = grid_plan(shape, stage)
    result = trace_plan(plan)
    cmp = compare(result, estimate(plan))
    p = cmp.peak
    out = [
        f"{shape} ZeRO-{stage}: traced {p.traced:,} B, ledger {p.low:,}–{p.high:,} B, "
        f"error {p.error_percent:+.1f} %, {'inside' if p.inside else 'OUTSIDE'} "
        f"({result.peak_phase.phase}; {result.wall_seconds:.0f} s)"
    ]
    for g in cmp.groups + cmp.phases:
        if g.inside is False and not g.split_apart:
            out.append(f"    {g.name}: traced {g.traced:,} B, ledger {g.low:,}–{g.high:,} B")
    return "\n".join(out)


def main(argv: list[str]) -> int:
    shapes = argv or list(SHAPES)
    for shape in shapes:
        for stage in (1, 2, 3):
            print(_line(shape, stage), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
