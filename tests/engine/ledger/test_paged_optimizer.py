"""bitsandbytes paged optimizers (engine/ledger/states/paged.py), following bitsandbytes/
optim/optimizer.py ``Optimizer8bit.get_state_buffer`` (``is_paged``: ``F.get_paged``,
cudaMallocManaged): the state pages between HBM and host memory, so its HBM row runs
from 0 to its size and a host row holds up to the same bytes."""

from __future__ import annotations

from ledger_plans import SMOL

from engine.estimate import estimate
from engine.plan import Plan, default_plan, with_values

BASE = {
    "model.preset": None,
    "model.name": "SmolLM-135M",
    **{f"model.architecture.{k}": v for k, v in SMOL.items()},
    "method.optimizer.name": "adam8bit",
    "method.precision.policy": "pure_16bit",
    "batch.seq_len": 512,
}


def _rows(plan: Plan) -> dict[str, tuple[int, int]]:
    return {r.id: (r.low, r.high) for r in estimate(plan).heaviest.rows}


def test_8bit_state_sizes_of_one_matrix() -> None:
    """bnb 8-bit blockwise state of the 576 × 1536 MLP weight (884,736 elements ≥ 4096):
    1 B per element per moment, and two fp32 absmax per 256-element block:
    2 × 3456 × 4 = 27,648 B (engine/ledger/states/optimizers.py)."""
    from engine.ledger.states.optimizers import state_allocs
    from engine.sections.method import OptimizerSection

    allocs = {
        a.name: a.n_bytes for a in state_allocs(OptimizerSection(name="adam8bit"), (1536, 576), 4)
    }
    assert allocs == {"exp_avg": 884_736, "exp_avg_sq": 884_736, "quant_absmax": 27_648, "step": 4}


def test_paged_state_runs_from_zero_in_hbm_and_up_to_all_of_it_on_host() -> None:
    plain = _rows(with_values(default_plan(), BASE))
    paged = _rows(with_values(default_plan(), {**BASE, "method.optimizer.paged": True}))
    states = [k for k in plain if k.startswith("hbm.optimizer.")]
    assert states and all(paged[k] == (0, plain[k][1]) for k in states)
    total = sum(plain[k][1] for k in states)
    assert paged["host.optimizer.paged"] == (0, total)
    assert "host.optimizer.paged" not in plain
    assert estimate(
        with_values(default_plan(), {**BASE, "method.optimizer.paged": True})
    ).peak.low < (estimate(with_values(default_plan(), BASE)).peak.low)
