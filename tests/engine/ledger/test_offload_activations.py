"""torchtune activation offloading (engine/ledger/activations/offload_activations.py),
following torchtune/training/_activation_offloading.py ``OffloadActivations``: saved
tensors go to pinned host memory; at most ``max_fwd_stash_size`` (5) stay on the GPU;
the output layer's input is not offloaded (``NoOpManager``)."""

from __future__ import annotations

from engine.estimate import estimate
from engine.ledger.activations.offload_activations import at_loss
from engine.plan import Plan, default_plan, with_values

FULL_AC = {"method.recompute.policy": "full", "batch.seq_len": 2048}


def _rows(plan: Plan) -> dict[str, tuple[int, int]]:
    return {r.id: (r.low, r.high) for r in estimate(plan).heaviest.rows}


def test_checkpointed_inputs_go_to_host_and_the_gpu_keeps_them_per_moment() -> None:
    """Default plan (Llama-3-8B shape: 32 layers, h 4096, full fine-tuning), full AC,
    b 1 × s 2048: each layer keeps its input, 2048 × 4096 × 2 B = 16,777,216 B. Offloaded,
    the host holds 32 × 16,777,216 = 536,870,912 B. On the GPU (torchtune 1814feb
    OffloadActivations.pack_tensor / unpack_tensor_with_streams):

    - at the loss, none: the last layer's input has id X; the final RMSNorm
      (torchtune/modules/rms_norm.py) packs x_fp32 (X+1, pow), rsqrt's output (X+2), the
      product's two factors (X+3, X+4) and, its scale trained, x_normed (X+5); that pack
      drops the stashed ids <= X+5-5 = X, the layer's input among them;
    - in backward, the running layer's input brought back (1 × unit at the last, a middle
      and the first layer's backward), and at a middle and the first layer's the previous
      layer's until the hook after the node that unpacked this one (0–1 × unit).

    No activation band: these are counts of tensors, not an estimate."""
    eager = _rows(with_values(default_plan(), FULL_AC))
    plan = with_values(default_plan(), {**FULL_AC, "method.recompute.offload_activations": True})
    off = _rows(plan)
    unit = 2048 * 4096 * 2
    assert off["host.activations.offloaded"] == (32 * unit, 32 * unit)
    assert off["hbm.activations.saved.layers"] == (0, 0)
    assert off["hbm.activations.offload.current"] == (unit, unit)
    assert off["hbm.activations.offload.previous"] == (0, unit)
    assert eager["hbm.activations.saved.layers"] == (int(32 * unit * 0.98), int(32 * unit * 1.05))
    assert off["hbm.activations.saved.head"] == eager["hbm.activations.saved.head"]
    moments = {r.id: r.moments for r in estimate(plan).heaviest.rows}
    assert moments["hbm.activations.saved.layers"] == {"forward", "backward.start"}
    assert moments["hbm.activations.offload.current"] == {
        "backward.layers",
        "backward.middle",
        "backward.end",
    }
    assert moments["hbm.activations.offload.previous"] == {"backward.middle", "backward.end"}


def test_lora_leaves_the_last_layers_input_in_the_stash() -> None:
    """LoRA freezes the final norm's scale (torchtune set_trainable_params: adapters only),
    so ``x_normed * self.scale`` saves only the scale — a Parameter, given an id but not
    offloaded and dropping nothing. The norm's last large pack is X+4, which drops ids <=
    X-1: the last layer's input X (16,777,216 B) is still on the GPU at the loss; the
    layer before's (X-2: the last layer's checkpoint dummy is X-1) is gone."""
    lora = {"method.kind": "lora", "method.recompute.offload_activations": True}
    off = _rows(with_values(default_plan(), {**FULL_AC, **lora}))
    unit = 2048 * 4096 * 2
    assert off["hbm.activations.saved.layers"] == (unit, unit)
    assert off["hbm.activations.offload.current"] == (unit, unit)


def test_the_stash_window_counts_ids_after_the_last_input() -> None:
    """:func:`at_loss` against the window by hand: 5 slots − 5 packs = 0 layers; 5 − 4 = 1
    slot, holding the last input (ceil(1 / 2) = 1: a layer takes two ids)."""
    full = with_values(default_plan(), FULL_AC)
    lora = with_values(full, {"method.kind": "lora"})
    assert at_loss(full, 32)[0] == 0
    assert at_loss(lora, 32)[0] == 1
    assert at_loss(lora, 0)[0] == 0


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
