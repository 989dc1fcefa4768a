"""torchtitan cases for the fidelity grid: full-width models cut to a few layers.

Shared by the CI slice (``tests/trace/test_titan_grid.py``) and the offline table
(``tests/fidelity_grid.py --titan``). A case is a plan on the ``torchtitan`` stack: the
Llama-3.1-8B (or Qwen3-8B, or Qwen3-30B-A3B for the MoE flavor) preset's layer shape —
hidden, heads, KV heads, FFN width or experts, vocabulary all as published — with 2–4
layers, FSDP2 over a fake world, one AC mode and one loss. The trace runs torchtitan
0.3.0's own code (``engine/trace/titan``).
The preset's architecture keeps its own separate q/k/v: the stack's
``runtime.qkv_fusion`` default (``auto`` → ``fused`` under torchtitan: every 0.3 flavor
builds one ``wqkv`` weight per layer, ``fuse_qkv=True``) makes ledger and trace count
one tensor — so fused AdamW keeps one step counter for it, not three.

:func:`per_layer_token_bytes` turns two traces that differ only in their layer count
into what one layer saves per token — the figure the ledger's activation profile for
torchtitan must reproduce — and reads the ledger's own from its saved-activations row.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from engine.estimate import Estimate, estimate
from engine.models.presets import load_preset
from engine.plan import Plan, with_values
from tests.trace.grid import Measured

PRESETS: dict[str, str] = {
    "llama": "llama-3.1-8b",
    "qwen3": "qwen3-8b",
    "qwen3_moe": "qwen3-30b-a3b",
}
"""Family → the preset whose layer shape the case keeps."""

AC: dict[str, dict[str, Any]] = {
    "none": {"method.recompute.policy": "none"},
    "full": {"method.recompute.policy": "full"},
    "sac_op": {"method.recompute.policy": "selective"},
    "sac_every2": {"method.recompute.policy": "every_k", "method.recompute.every_k": 2},
}
"""AC mode name → plan changes (``sac_op``: per-op SelectiveAC; ``sac_every2``: 0.2's
layer-every-2, rebuilt)."""

LOSS_IMPL: dict[str, str] = {"standard": "eager", "chunked": "chunked"}
"""Grid loss name → ``runtime.loss_impl``: plain cross-entropy, or ``ChunkedLossWrapper``
with its default 8 chunks. Set explicitly (with ``runtime.zero_grad``), so ledger and
trace describe the same step whatever the stack's defaults become."""


@dataclass(frozen=True)
class TitanCase:
    """One traced torchtitan configuration."""

    family: str = "llama"
    layers: int = 2
    seq_len: int = 2048
    micro_batch: int = 1
    world: int = 1
    ac: str = "none"
    loss: str = "standard"
    zero_grad: str = "zero_fill"

    @property
    def name(self) -> str:
        return (
            f"titan-{self.family}-L{self.layers}-s{self.seq_len}-b{self.micro_batch}"
            f"-fsdp{self.world}-{self.ac}-{self.loss}"
            + ("" if self.zero_grad == "zero_fill" else f"-{self.zero_grad}")
        )

    def plan(self) -> Plan:
        _, arch = load_preset(PRESETS[self.family])
        arch = arch.model_copy(update={"layers": self.layers, "max_position": self.seq_len})
        changes: dict[str, Any] = {
            "model.name": f"{PRESETS[self.family]} × {self.layers} layers",
            "model.preset": None,
            "model.architecture": arch.model_dump(mode="json"),
            "stack.name": "torchtitan",
            "parallelism.strategy": "fsdp2",
            "parallelism.dp": self.world,
            "batch.seq_len": self.seq_len,
            "batch.micro_batch": self.micro_batch,
            "runtime.loss_impl": LOSS_IMPL[self.loss],
            "runtime.zero_grad": self.zero_grad,
            "runtime.attention": "flex",  # 0.3.0 model_registry's attn_backend default
            **AC[self.ac],
        }
        return with_values(Plan(), changes)


def measure_titan(case: TitanCase) -> Measured:
    """Trace the case with torchtitan's code and estimate it."""
    from engine.trace.runner import TraceOptions, trace_plan

    plan = case.plan()
    return Measured(case, trace_plan(plan, TraceOptions(steps=2)), estimate(plan))


def _saved_row(est: Estimate) -> tuple[int, int]:
    """The ledger's per-layer saved activations row (all layers), low and high."""
    rows = [r for r in est.rows if r.location == "hbm" and r.label.startswith("Saved activations")]
    return rows[0].low, rows[0].high


def per_layer_token_bytes(short: Measured, long: Measured) -> tuple[float, float, float]:
    """(traced, ledger low, ledger high) bytes one decoder layer saves per token.

    Traced: the saved activations after the forward differ between the two cases by
    exactly their extra layers (embedding, head and loss are the same), so
    (saved_long − saved_short) ÷ (extra layers × tokens). Ledger: its saved-activations
    row ÷ (layers × tokens), from the longer case.
    """
    extra = long.case.plan().model.architecture.layers - short.case.plan().model.architecture.layers
    plan = long.case.plan()
    tokens = plan.batch.micro_batch * plan.batch.seq_len
    traced = (long.result.saved_activations - short.result.saved_activations) / (extra * tokens)
    low, high = _saved_row(long.est)
    per = plan.model.architecture.layers * tokens
    return traced, low / per, high / per
