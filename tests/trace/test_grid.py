"""The CI fidelity grid: tiny traced models against the ledger.

Two checks per case (``grid.py`` builds and measures them):

- the ledger's allocated-peak range contains the traced peak — for the stacks the
  ledger is known to model on Llama-like models (plain, DDP, FSDP2, HSDP; full and
  LoRA; fp32, bf16, mixed; AdamW in each implementation, SGD, Adafactor; recompute on
  full fine-tuning; gradient accumulation);
- the persistent model states — parameters, gradients, optimizer state — equal the
  ledger's exact rows, for every dense family. One known difference is allowed, and
  bounded: FSDP2 reduce-scatters a unit's gradients into one flat buffer and keeps the
  sharded gradients as views of it (``foreach_reduce`` in torch/distributed/fsdp/
  _fully_shard/_fsdp_collectives.py), so the allocator rounds that buffer once where
  the ledger rounds every gradient: the trace may hold less, by under 512 B a tensor.

Cases the ledger does not yet contain (other families' activations, TP, recompute with
LoRA or FSDP2 at tiny shapes) are reported by ``tests/fidelity_grid.py``, not asserted.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.trace.grid import Case, measure
from tests.trace.needs_extra import needs_trace_extra

pytestmark = needs_trace_extra

INSIDE: tuple[Case, ...] = (
    Case("llama", {"precision": "fp32"}),
    Case("llama", {"precision": "mixed"}),
    Case("llama_untied", {"optimizer": "adamw_fused"}),
    Case("llama", {"optimizer": "adamw_loop", "precision": "fp32"}),
    Case("llama", {"optimizer": "sgd_momentum"}),
    Case("llama", {"optimizer": "adafactor", "precision": "fp32"}),
    Case("llama", {"recompute": "full"}),
    Case("llama", {"recompute": "every2", "strategy": "ddp2"}),
    Case("llama", {"strategy": "ddp2", "method": "lora"}),
    Case("llama", {"strategy": "fsdp4", "precision": "mixed"}),
    Case("llama", {"strategy": "fsdp4_noreshard"}),
    Case("llama", {"strategy": "hsdp2x2", "precision": "mixed"}),
    Case("llama", {"strategy": "fsdp4", "method": "lora_mlp"}),
    Case("llama", {"strategy": "fsdp4"}, grad_accum=2),
    Case("mistral", {"method": "lora"}),
    Case("qwen2", {"strategy": "ddp2"}),
)

FAMILY_GRID: tuple[Case, ...] = (
    Case("qwen3", {"strategy": "fsdp8", "recompute": "full"}),
    Case("gemma3", {"strategy": "fsdp8"}),
    Case("gemma3", {"recompute": "full"}),
    Case("gemma2", {"strategy": "fsdp8", "recompute": "full"}),
    Case("llama", {"optimizer": "adafactor", "recompute": "full"}),
    Case("gpt2", {"strategy": "fsdp8", "recompute": "full"}),
    Case("cohere", {"recompute": "full"}),
    Case("falcon", {"recompute": "full"}),
    Case("stablelm_parallel", {"strategy": "fsdp8"}),
    # fused experts as transformers 5 holds them: exact at full recompute (one AdamW
    # step counter per stored tensor), DeepSeek's fp32 router traced under FSDP2
    Case("mixtral", {"recompute": "full"}),
    Case("phimoe", {"strategy": "fsdp8", "recompute": "full"}),
    Case("deepseek_v3", {"recompute": "full"}),
    Case("deepseek_v2", {"strategy": "fsdp8"}),
)
"""A CI slice of the offline family grid (``tests/fidelity_grid.py``, docs/fidelity-grid.md):
families with their own norms, activations and residual layouts, single device and
FSDP2 over 8 ranks, with and without full recompute."""

DENSE_FAMILIES = ("qwen3", "gemma2", "gemma3", "phi3", "gpt2", "gpt_neox")


@pytest.mark.parametrize("case", INSIDE, ids=lambda c: c.name)
def test_ledger_range_contains_the_traced_peak(case: Case) -> None:
    m = measure(case)
    assert m.low <= m.traced <= m.high, (m.traced, m.low, m.high)
    sharded = case.plan().parallelism.strategy.startswith("fsdp2")
    assert m.states_verdict() in (("ok", "ok*") if sharded else ("ok",))


ROOT_GRADS_HIGH = "gemma2-fsdp8-full-bf16-adamw-full"
"""Issue 35 items 6/8: at layer 0's backward the trace holds the two eager masks and the
rotary / position tensors (its 330,752 B of activations) and layer 0's checkpoint input,
which the ledger now counts there; what puts its low end 0.9 % above the trace is
``hbm.buckets.root_grads`` (1,049,088 B of the tied root's unsharded gradient against
147,968 B of traced gradients) — the tied embedding's gradient, not modelled yet."""


def _family_grid() -> list[Any]:
    mark = pytest.mark.xfail(strict=True, reason=ROOT_GRADS_HIGH)
    return [
        pytest.param(c, marks=mark, id=c.name) if c.name == ROOT_GRADS_HIGH else c
        for c in FAMILY_GRID
    ]


@pytest.mark.parametrize("case", _family_grid(), ids=lambda c: c.name)
def test_family_grid_is_inside_and_within_one_percent(case: Case) -> None:
    """Each family's rows follow its transformers 5.24 modeling code: the traced peak
    is inside the range and the midpoint within 1 % of it."""
    m = measure(case)
    assert m.low <= m.traced <= m.high, (m.traced, m.low, m.high)
    assert abs(m.mid_error_percent) <= 1.0, m.mid_error_percent


@pytest.mark.parametrize("family", DENSE_FAMILIES)
def test_model_states_match_the_ledger(family: str) -> None:
    m = measure(Case(family))
    assert m.states_verdict() == "ok", (m.traced_states(), m.ledger_states())
