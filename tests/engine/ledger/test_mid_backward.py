"""FSDP2's mid-backward moments count what is still live (issue 35 item 6).

After the last layer's backward autograd frees each layer's saved set as its backward
finishes (torch ``torch/csrc/autograd/engine.cpp``: saved variables released after a
node runs), and FSDP2 writes each layer's sharded gradient at its reduce-scatter
(``torch/distributed/fsdp/_fully_shard/_fsdp_collectives.py`` ``foreach_reduce``). So at
the second layer's backward (``backward.middle``) every saved set but the last layer's is
live, with the last layer's gradient shard and its reduce-scatter input; at the first
layer's (``backward.end``) that layer's own saved set is.
"""

from __future__ import annotations

from typing import Any

from engine.estimate import estimate
from engine.ledger.activations.packing import band_of
from engine.ledger.activations.stage_layers import stage_layers
from engine.plan import with_values
from engine.presets import plan_for_model_preset
from engine.stacks.defaults import resolved

LAYER_PARAMS = 2 * 4_096 * 4_096 + 2 * 1_024 * 4_096 + 3 * 14_336 * 4_096 + 2 * 4_096
"""Llama-3.1-8B decoder layer: q and o, k and v (8 kv heads of 128), gate/up/down, two
norms = 218,112,000."""


def _rows(**changes: Any) -> tuple[dict[str, Any], dict[str, Any], Any]:
    plan = resolved(with_values(plan_for_model_preset("llama-3.1-8b"), changes))
    e = estimate(plan)
    rows = {r.id: r for r in e.rows if r.location == "hbm"}
    return rows, e.stages[0].moments, plan


def test_middle_keeps_all_but_the_last_layer_and_its_gradient_shard() -> None:
    """Llama-3.1-8B, FSDP2 × 8, bf16 autocast, fp32 gradients, s 4,096, b 1, no
    recompute. 32 saved sets S each: 31 S at the second layer's backward, S at the
    first layer's. The last layer's fp32 gradient shard: 218,112,000 / 8 · 4 B =
    109,056,000 B (every shard a multiple of 512 B). The middle moment then holds, over
    the last layer's, −S + the reduce-scatter input + that shard."""
    rows, moments, plan = _rows()
    s = stage_layers(plan, 0).kinds[0].bytes
    band = band_of(plan)  # the activation band, 0.98–1.05 by default
    assert (rows["hbm.activations.saved.layers"].high, band(32 * s)[1]) == (
        32 * s * 105 // 100,
    ) * 2
    assert rows["hbm.activations.remaining.middle"].high == band(31 * s)[1]
    assert rows["hbm.activations.remaining.first_layer"].high == band(s)[1]
    assert rows["hbm.grads.last_layer"].high == LAYER_PARAMS // 8 * 4 == 109_056_000
    rs = rows["hbm.buckets.reduce_scatter"].high
    grown = moments["backward.middle"].high - moments["backward.layers"].high
    assert grown == band(31 * s)[1] - band(32 * s)[1] + rs + 109_056_000


def test_rotary_tables_live_through_the_layers() -> None:
    """Every layer's backward reads the shared rotary cos / sin (``apply_rotary_pos_emb``
    keeps them), the first layer's too: 2 × 4,096 · 128 · 2 B = 2,097,152 B."""
    rows, _, _ = _rows()
    other = rows["hbm.activations.saved.other"]
    assert other.high == 2 * 4_096 * 128 * 2
    assert {"backward.middle", "backward.end"} <= other.moments


def test_no_middle_rows_for_two_layers() -> None:
    """A stage of two layers has no middle layer: neither middle row exists."""
    rows, _, _ = _rows(**{"model.architecture.layers": 2})
    assert "hbm.activations.remaining.middle" not in rows
    assert "hbm.grads.last_layer" not in rows
    assert "hbm.activations.remaining.first_layer" in rows


def test_accumulation_leaves_the_gradients_to_the_persistent_row() -> None:
    """Under gradient accumulation ``hbm.grads`` is live throughout: no shard row."""
    rows, _, _ = _rows(**{"batch.grad_accum": 2})
    assert "hbm.grads.last_layer" not in rows
