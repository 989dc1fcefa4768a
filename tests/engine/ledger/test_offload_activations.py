"""torchtune activation offloading (engine/ledger/activations/offload_activations.py),
following torchtune/training/_activation_offloading.py ``OffloadActivations``: saved
tensors go to pinned host memory; at most ``max_fwd_stash_size`` (5) stay on the GPU;
the output layer's input is not offloaded (``NoOpManager``)."""

from __future__ import annotations

from engine.estimate import estimate
from engine.plan import Plan, default_plan, with_values

FULL_AC = {"method.recompute.policy": "full", "batch.seq_len": 2048}


def _rows(plan: Plan) -> dict[str, tuple[int, int]]:
    return {r.id: (r.low, r.high) for r in estimate(plan).heaviest.rows}


def test_checkpointed_inputs_go_to_host_and_one_to_five_stay() -> None:
    """Default plan (Llama-3-8B shape: 32 layers, h 4096), full AC, b 1 × s 2048: each
    layer keeps its input, 2048 × 4096 × 2 B = 16,777,216 B. Offloaded, the host holds
    32 × 16,777,216 = 536,870,912 B; the GPU 1 to 5 of them: 16,777,216–83,886,080 B (no
    activation band: the stash is a count of tensors, not an estimate)."""
    eager = _rows(with_values(default_plan(), FULL_AC))
    off = _rows(
        with_values(default_plan(), {**FULL_AC, "method.recompute.offload_activations": True})
    )
    unit = 2048 * 4096 * 2
    assert off["host.activations.offloaded"] == (32 * unit, 32 * unit)
    assert off["hbm.activations.saved.layers"] == (unit, 5 * unit)
    assert eager["hbm.activations.saved.layers"] == (int(32 * unit * 0.98), int(32 * unit * 1.05))
    assert off["hbm.activations.saved.head"] == eager["hbm.activations.saved.head"]


def test_without_checkpointing_the_layer_in_flight_and_the_next_stay() -> None:
    """No AC: a layer's saved set is many tensors; the GPU keeps one to two layers' sets
    and the host the whole stage, as the save_on_cpu policy ("offload") does."""
    sets = {"method.recompute.policy": "none", "batch.seq_len": 2048}
    off = _rows(with_values(default_plan(), {**sets, "method.recompute.offload_activations": True}))
    policy = _rows(with_values(default_plan(), {**sets, "method.recompute.policy": "offload"}))
    assert off["hbm.activations.saved.layers"] == policy["hbm.activations.saved.layers"]
    assert off["host.activations.offloaded"] == policy["host.activations.offloaded"]
    low, high = off["hbm.activations.saved.layers"]
    assert high == 2 * low and off["host.activations.offloaded"][0] == 32 * low
