"""``fsdp_reshard_after_forward`` as an int, the way torch's fully_shard reads it.

torch 2.13 ``torch/distributed/fsdp/_fully_shard/_fsdp_init.py``
``_get_post_forward_mesh_info``: an int below 1 raises; the int 1 warns
"reshard_after_forward=1 (int) means resharding parameters to world size 1" and is
then treated as False (the unsharded unit is kept until backward). Python's
``True == 1`` made a plan with 1 equal to (and hash like) the plan with True, so every
cache keyed on the plan returned the other plan's results.
"""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from engine.estimate import estimate
from engine.plan import default_plan, with_value

FIELD = "parallelism.knobs.fsdp_reshard_after_forward"


def test_one_is_stored_as_false_like_torch() -> None:
    plan = with_value(default_plan(), FIELD, 1)
    assert plan.parallelism.knobs.fsdp_reshard_after_forward is False


def test_one_and_true_are_different_plans_with_different_estimates() -> None:
    """Estimated in this order, the cache used to hand the True plan's hash to the 1 plan."""
    kept = estimate(with_value(default_plan(), FIELD, True))
    one = estimate(with_value(default_plan(), FIELD, 1))
    unsharded = estimate(with_value(default_plan(), FIELD, False))
    assert one.config_hash != kept.config_hash
    assert one.config_hash == unsharded.config_hash
    assert one.peak == unsharded.peak != kept.peak


def test_a_group_size_stays_an_int() -> None:
    plan = with_value(default_plan(), FIELD, 4)
    raf = plan.parallelism.knobs.fsdp_reshard_after_forward
    assert raf == 4 and not isinstance(raf, bool)


def test_below_one_is_refused() -> None:
    with pytest.raises(ValidationError):
        with_value(default_plan(), FIELD, 0)
