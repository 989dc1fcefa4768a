"""The recomputed layer's backward working set (``hbm.activations.working.layer``).

Hand-derived for the tiny Gemma-3 of tests/trace/grid.py (hidden 256, intermediate 512,
seq 256, micro-batch 1, bf16, full recompute). transformers 5.24 ``Gemma3RMSNorm.forward``
computes ``self._norm(x.float()) * (1.0 + self.weight.float())`` and casts back with
``type_as``, so its backward upcasts the incoming gradient: one fp32 hidden-sized tensor,
256·256·4 = 262,144 B, on top of Llama's MLP grads 3 × 256·512·2 = 786,432 B and
residual grads 2 × 256·256·2 = 262,144 B. The same shapes as a Llama (16-bit norms) have
no such term: the working sets differ by exactly 262,144 B before the band, once the
recomputed layers' own saved sets are taken out.
"""

from __future__ import annotations

from engine.estimate import estimate
from engine.ledger.row import Row
from tests.trace.grid import Case


def _working(family: str) -> Row:
    plan = Case(family, {"recompute": "full"}).plan()
    return next(r for r in estimate(plan).rows if r.id == "hbm.activations.working.layer")


def test_gemma_norm_backward_gradient_is_counted() -> None:
    row = _working("gemma3")
    assert "Gemma fp32 (1 + w) norm backward gradient 256·256·4" in row.formula
    assert "= 1,310,720 + recomputed layer" in row.formula  # 786,432 + 262,144 + 262,144


def test_llama_has_no_fp32_norm_gradient() -> None:
    row = _working("llama")
    assert "Gemma" not in row.formula
    assert "= 1,048,576 + recomputed layer" in row.formula
