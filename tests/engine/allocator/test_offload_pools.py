"""FSDP1 CPU offload of a QLoRA model: what stays on the GPU, hand-derived from torch's
FSDP1 and bitsandbytes.

- The NF4 constants: ``_init_utils._move_module_to_device`` moves every parameter with
  ``param.to(device)``, which ``bnb.nn.Params4bit.to`` extends to its ``quant_state``
  (absmax, second-level absmax, offset); ``_init_param_handle_from_params`` then sends
  only the flat parameter to the CPU under ``CPUOffload(offload_params=True)``. For
  Llama-2-7B with double quantization (64-value blocks, 256 absmax per second-level
  block), each allocation rounded to 512 B: q, k, v, o (4096² values) 262,144 uint8 +
  1,024 × 4 = 4,096 fp32 + 4 B offset (→ 512) = 266,752 B each; gate, up, down
  (4096 × 11008) 704,512 + 2,752 × 4 = 11,008 (→ 11,264) + 512 = 716,288 B each: per
  layer 4 × 266,752 + 3 × 716,288 = 3,215,872 B, × 32 = 102,907,904 B.
- The pre-unshard stream's pool: ``_runtime_utils._unshard`` runs ``pre_unshard`` on
  ``pre_unshard_stream`` before the ``limit_all_gathers`` rate limiter; under offload its
  ``flat_param_to(device)`` copies the CPU shard into that stream's pool, and
  ``_all_gather_flat_param`` records the unshard stream on the copy, so its block is free
  only once the all-gather ran. The root's copy is still in flight when the first layer
  makes its own: both are cached. Llama-2-70B over 2 ranks: the root unit (embedding
  and lm_head 2 × 32000 × 8192 × 2 + norm 8192 × 2 = 1,048,592,384 B) shard
  524,296,192 B; a layer (855,638,016 4-bit values × 0.5 + norms 32,768 = 427,851,776 B)
  shard 213,925,888 B; together 738,222,080 B. The QLoRA adapters are FSDP units of
  their own (use_orig_params=False), and the third unshard inside the first layer waits
  for the first adapter's free event, after both all-gathers: no third copy. Without
  nested units the host first waits at the third layer (the first layer's free event):
  up to 2 more layer shards, 738,222,080 + 2 × 213,925,888 = 1,166,073,856 B.
"""

from __future__ import annotations

from engine.allocator.reserve import SideBytes, pre_unshard_pool, reserved_extra
from engine.estimate import estimate
from engine.ledger.peaks.runtime import reserve_factors
from engine.plan import with_values
from engine.stacks.defaults import resolved
from tests.engine.allocator.published import ANSWERAI_7B_LORA, plan_of

QLORA_7B = {**ANSWERAI_7B_LORA, "method.kind": "qlora", "batch.seq_len": 512}


def test_fsdp_offload_leaves_the_nf4_constants_on_the_gpu() -> None:
    on = resolved(plan_of("llama-2-7b", {**QLORA_7B, "offload.params": "cpu"}))
    rows = {(r.id, r.location): r for r in estimate(on).heaviest.rows}
    assert rows[("hbm.weights.nf4_constants", "hbm")].low == 102_907_904
    assert ("hbm.weights.nf4", "hbm") not in rows  # the packed data is offloaded


def test_the_pre_unshard_pool_holds_the_root_and_a_layer_shard() -> None:
    root, layer = 1_048_592_384, 427_851_776
    assert pre_unshard_pool(root, layer, 2, nested_units=True) == (738_222_080,) * 2
    assert pre_unshard_pool(root, layer, 2, nested_units=False) == (
        738_222_080,
        1_166_073_856,
    )
    assert pre_unshard_pool(0, layer, 2, nested_units=True) == (213_925_888,) * 2  # no root


def test_the_pre_unshard_pool_adds_to_the_reserve_under_offload() -> None:
    sets = {
        **QLORA_7B,
        "model.preset": None,
        "model.architecture.vocab": 32_000,
        "offload.params": "cpu",
        "batch.micro_batch": 2,
        "batch.seq_len": 2048,
    }
    plan = resolved(plan_of("llama-3.1-70b", sets))
    st = estimate(plan).heaviest.totals
    side = st.side
    assert isinstance(side, SideBytes) and side.pre == (738_222_080, 738_222_080)
    bare = SideBytes(int(side), side.init, side.unit, side.root, side.logits)
    m, peak = reserve_factors(plan), st.peak
    with_pre = reserved_extra(m, peak.low, peak.high, st.steady, side)
    without = reserved_extra(m, peak.low, peak.high, st.steady, bare)
    assert (with_pre[0] - without[0], with_pre[1] - without[1]) == (738_222_080,) * 2
    # the loss floor bounds the compute stream's pool: the pre-unshard pool stays beside it
    # (the construction cache and logits of tests/engine/allocator/test_loss_floor.py)
    init, block, request = (1_604_317_184, 2_070_925_312), 786_432_000, 1_572_096_000
    pre, at = (738_222_080, 738_222_080), (peak.low, peak.high)
    floored = SideBytes(int(side), init, side.unit, side.root, (block, request), pre)
    floored_bare = SideBytes(int(side), init, side.unit, side.root, (block, request))
    a = reserved_extra(m, peak.low, peak.high, st.steady, floored, at)
    b = reserved_extra(m, peak.low, peak.high, st.steady, floored_bare, at)
    assert b == (init[0] + block, init[1] + block)  # the floor binds at both ends
    assert (a[0] - b[0], a[1] - b[1]) == pre
    # no offload, no pool
    off = resolved(with_values(plan, {"offload.params": "none"}))
    assert estimate(off).heaviest.totals.side.pre == (0, 0)  # type: ignore[attr-defined]
