"""FSDP1's last layer unit, prefetched by the root before the loss's backward
(``engine.ledger.peaks.fsdp1_prefetch``), hand-derived from torch's FSDP1 code.

torch 2.13 ``torch/distributed/fsdp/_runtime_utils.py`` ``_pre_backward_hook`` ->
``_prefetch_handle(..., _PrefetchMode.BACKWARD)`` -> ``_exec_order_utils.py``
``ExecOrderData.get_handle_to_backward_prefetch`` (BACKWARD_PRE: the handle at index − 1
in the post-forward order). The root unit ends its forward last, so its pre-backward
hook (on the loss tensor Hugging Face's forward returns) all-gathers the last decoder
layer's unit before the loss's backward runs: one more layer unit live at
``backward.start``, in the unshard stream's pool.

Answer.AI's Llama-2-7B LoRA plan (FSDP1 FULL_SHARD over 2 ranks, bf16, adapters their
own units): a layer unit is 4·4096² (q, k, v, o) + 3·4096·11008 (gate, up, down) =
202,375,168 elements × 2 B = 404,750,336 B + two RMSNorm weights 2·4096·2 = 16,384 B =
404,766,720 B.
"""

from __future__ import annotations

from engine.allocator.reserve import SideBytes
from engine.estimate import estimate
from engine.ledger.peaks.fsdp1_prefetch import PREFETCH_ID
from engine.plan import Plan, with_values
from engine.stacks.defaults import resolved
from tests.engine.allocator.published import ANSWERAI_7B_LORA, plan_of

UNIT = 404_766_720


def lora(micro_batch: int, prefetch: str = "backward_pre") -> Plan:
    base = plan_of("llama-2-7b", {**ANSWERAI_7B_LORA, "batch.seq_len": 2048})
    changes = {
        "batch.micro_batch": micro_batch,
        "runtime.kept_logits": "fp32",
        "parallelism.knobs.fsdp1_backward_prefetch": prefetch,
    }
    return resolved(with_values(base, changes))


def test_the_root_prefetches_one_layer_unit_live_only_at_the_loss() -> None:
    st = estimate(lora(1)).heaviest
    rows = [r for r in st.rows if r.id == PREFETCH_ID]
    assert len(rows) == 1
    row = rows[0]
    assert (row.low, row.high) == (UNIT, UNIT)
    assert row.moments == frozenset({"backward.start"})
    # BACKWARD_POST prefetches from a handle's post-backward hook: nothing before the
    # loss's backward (the root's post-backward comes last); none without prefetch
    for other in ("backward_post", "none"):
        assert not [r for r in estimate(lora(1, other)).heaviest.rows if r.id == PREFETCH_ID]


def test_the_loss_moment_holds_the_unit_once_and_the_side_pools_do_not_grow() -> None:
    """Allocated at ``backward.start`` rises by exactly one unit against BACKWARD_POST
    (limit_all_gathers keeps two units in the layers' backward either way); the side
    bytes, the unshard pool's working set, stay the same: the prefetched unit reuses a
    block the forward's all-gathers left cached there (``SideBytes.ahead``)."""
    pre, post = estimate(lora(6)).heaviest, estimate(lora(6, "backward_post")).heaviest
    at_pre, at_post = pre.totals.at_loss("backward"), post.totals.at_loss("backward")
    assert at_pre is not None and at_post is not None
    assert (at_pre[0] - at_post[0], at_pre[1] - at_post[1]) == (UNIT, UNIT)
    side_pre, side_post = pre.totals.side, post.totals.side
    assert isinstance(side_pre, SideBytes) and isinstance(side_post, SideBytes)
    assert int(side_pre) == int(side_post)
    assert (side_pre.ahead, side_post.ahead) == (UNIT, 0)


def test_the_loss_floor_counts_the_prefetched_block_once() -> None:
    """Micro-batch 6 (the loss floor holds: its fp32 requests outgrow every cached
    block, ``test_loss_floor.py``): the low end, the loss's allocated bytes + the
    construction cache + the 16-bit block, rises by the unit, now live; the high end
    already held it as one of the unshard pool's cached layer blocks, so it does not
    rise (counting it as compute-stream bytes too would add it twice)."""
    pre, post = estimate(lora(6)).heaviest, estimate(lora(6, "backward_post")).heaviest
    assert pre.peak_phase == post.peak_phase == "backward"
    assert pre.reserved_peak.low - post.reserved_peak.low == UNIT
    assert pre.reserved_peak.high == post.reserved_peak.high
