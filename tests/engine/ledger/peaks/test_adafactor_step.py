"""transformers' Adafactor step temporaries: the largest parameter's update, exact.

Derivation (transformers 5.24 ``optimization.py`` ``Adafactor.step``, one parameter at a
time): a bf16 parameter of R × C gets ``grad.float()`` and ``p.float()`` (2 × 4RC), then
``update = grad**2 + eps`` and, factored, ``_approx_sq_grad``'s ``r_factor`` (4R),
``c_factor`` (4C) and their product beside the old update (2 × 4RC): 4 × 4RC + 4R + 4C.
Traced for a tiny Llama (tests/trace/grid.py): the bf16 embedding 2048 × 256 peaks at
4 × 2,097,152 + 8,192 + 1,024 = 8,397,824 B of optimizer temporaries. The default plan
(FSDP2 over 8, fp32 sharded parameters and gradients: no copies) shards the 128256 × 4096
embedding on dim 0 to 16032 × 4096: 2 × 262,668,288 + 64,512 (16032·4 rounded) + 16,384
= 525,417,472 B.
"""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from engine.estimate import estimate
from engine.ledger.peaks.adafactor_step import tensor_peak
from engine.plan import default_plan, with_values


def test_tiny_embedding_matches_the_trace() -> None:
    assert tensor_peak((2048, 256), copies=2, gran=512) == 8_397_824


def test_fp32_parameter_makes_no_copies_and_1d_has_no_factors() -> None:
    """fp32 grad and param: grad**2 and update only, 2 × 4n; a 1-D bias the same."""
    assert tensor_peak((2048, 256), copies=0, gran=512) == 2 * 2_097_152 + 8_192 + 1_024
    assert tensor_peak((4096,), copies=2, gran=512) == 4 * 16_384


def test_default_plan_row_is_exact_and_never_zero() -> None:
    plan = with_values(default_plan(), {"method.optimizer.name": "adafactor"})
    row = next(r for r in estimate(plan).rows if r.id == "hbm.optimizer_step.temporaries")
    assert row.low == row.high == 2 * 262_668_288 + 64_512 + 16_384
    assert row.source == "hf-adafactor"


@given(st.integers(1, 4096), st.integers(1, 4096), st.integers(0, 2))
def test_factored_peak_grows_with_copies(r: int, c: int, copies: int) -> None:
    """Each fp32 copy adds one parameter-sized block, never less than 4·r·c bytes."""
    more = tensor_peak((r, c), copies + 1, 512) - tensor_peak((r, c), copies, 512)
    assert more >= 4 * r * c and more % 512 == 0
