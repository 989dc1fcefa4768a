"""DeepSpeed ZeRO rows the ``memplan trace`` grid (engine/trace/deepspeed/grid.py) corrected,
derived by hand from DeepSpeed 0.19.8's code (site-packages/deepspeed/runtime/zero/).

Grid shape h512-L2-v8k at world 8, bf16: reduce_bucket_size 1,000,000 elements.
"""

from __future__ import annotations

from engine.estimate import estimate
from engine.trace.deepspeed.grid import grid_plan


def test_zero12_ipg_bucket_is_not_live_at_the_loss() -> None:
    """stage_1_and_2.py ``process_gradients`` calls ``setup_buckets`` from the first
    parameter's gradient hook, after the loss's backward; ``_release_ipg_buffers`` frees it
    at the end of backward. So the bucket, 1,000,000 el. × 2 B = 2,000,000 → 2,000,384 B
    (rounded to 512), is live at the layers' moments and at backward.end, not at
    backward.start (the loss)."""
    for stage in (1, 2):
        rows = {r.id: r for r in estimate(grid_plan("h512-L2-v8k", stage)).rows}
        bucket = rows["hbm.buckets.zero"]
        assert bucket.low == bucket.high == 2_000_384
        assert "backward.start" not in bucket.moments
        assert "forward" not in bucket.moments
        assert {"backward.layers", "backward.end"} <= bucket.moments


def test_zero3_holds_no_decoder_layer_at_the_loss() -> None:
    """parameter_offload.py ``post_sub_module_forward_function`` calls
    partitioned_param_coordinator.py ``release_sub_module`` after each decoder layer's
    forward, so at the loss (the ``forward`` and ``backward.start`` moments) only the head
    is gathered: 8192 · 512 × 2 B = 8,388,608 B (``hbm.gathered.reused.root``). One layer,
    2,950,144 el. × 2 B = 5,900,288 B, is gathered only once the layers' backward runs."""
    est = estimate(grid_plan("h512-L2-v8k", 3))
    rows = {r.id: r for r in est.rows}
    layer, head = rows["hbm.gathered.layers"], rows["hbm.gathered.reused.root"]
    assert layer.low == 2_950_144 * 2 == 5_900_288
    assert "forward" not in layer.moments and "backward.start" not in layer.moments
    assert head.low == head.high == 8192 * 512 * 2
    assert {"forward", "backward.start"} <= head.moments
    gathered_at_loss = sum(
        r.high for r in est.rows if r.group == "gathered" and "forward" in r.moments
    )
    assert gathered_at_loss == 8_388_608
