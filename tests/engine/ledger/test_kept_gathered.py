"""``reshard_after_forward=False``: units kept gathered are still resharded after their
own backward (issue 35 item 8; torch ``_fsdp_param_group.py`` ``post_backward``, FSDP1
``_runtime_utils.py`` ``_post_backward_reshard`` / ``_should_free_in_backward``)."""

from __future__ import annotations

from typing import Any

from engine.estimate import estimate
from engine.ledger.peaks.kept_gathered import kept_gathered_rows
from engine.plan import with_values
from engine.presets import plan_for_model_preset
from engine.stacks.defaults import resolved

IDS = ("hbm.gathered.layers", "hbm.gathered.layers_left", "hbm.gathered.first_layer")
UNIT = 218_112_000 * 2
"""A Llama-3.1-8B decoder layer gathered in bf16: 218,112,000 parameters × 2 B."""


def _gathered(**changes: Any) -> dict[str, tuple[int, frozenset[str]]]:
    base = {"parallelism.knobs.fsdp_reshard_after_forward": False, **changes}
    plan = resolved(with_values(plan_for_model_preset("llama-3.1-8b"), base))
    return {
        r.id: (r.high, r.moments)
        for r in estimate(plan).rows
        if r.id.startswith("hbm.gathered.") and r.id != "hbm.gathered.root"
    }


def test_fsdp2_reshards_each_layer_after_its_backward() -> None:
    """FSDP2 × 8, 32 layers: all 32 units (13,959,168,000 B) until the last layer's
    backward, 31 at the second layer's, the first one alone at the first layer's; no
    all-gather buffer is live in backward (nothing is gathered again)."""
    g = _gathered()
    layers, live = g["hbm.gathered.layers"]
    assert layers == 32 * UNIT == 13_959_168_000
    assert "backward.layers" in live and "backward.middle" not in live
    assert "backward.end" not in live
    assert g["hbm.gathered.layers_left"] == (31 * UNIT, frozenset({"backward.middle"}))
    assert g["hbm.gathered.first_layer"] == (UNIT, frozenset({"backward.end"}))


def test_fsdp1_no_sync_micro_steps_keep_every_unit() -> None:
    """FSDP1 ``SHARD_GRAD_OP`` under accumulation keeps the units (no_sync micro-steps
    skip the free): one row, live through backward's end (conservative)."""
    rows = kept_gathered_rows(4, 10, "fsdp1", False, IDS)
    assert [r.id for r in rows] == ["hbm.gathered.layers"]
    assert rows[0].high == 40 and "backward.end" in rows[0].moments


def test_two_layers_have_no_middle() -> None:
    rows = kept_gathered_rows(2, 10, "fsdp2-prefetch", True, IDS)
    assert [(r.id, r.high) for r in rows] == [
        ("hbm.gathered.layers", 20),
        ("hbm.gathered.first_layer", 10),
    ]
