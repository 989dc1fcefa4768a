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
  ``pre_unshard_stream``, whose ``flat_param_to(device)`` copies the CPU shard into that
  stream's pool; the largest shard stays cached there. Llama-2-70B over 2 ranks: the
  root unit (embedding and lm_head 2 × 32000 × 8192 × 2 + norm 8192 × 2 =
  1,048,592,384 B) outweighs a layer (855,638,016 4-bit values × 0.5 + norms 32,768 =
  427,851,776 B): its shard 524,296,192 B.
"""

from __future__ import annotations

from engine.allocator.reserve import SideBytes, reserved_extra
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


def test_the_pre_unshard_pool_keeps_the_largest_shard_under_offload() -> None:
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
    assert isinstance(side, SideBytes) and side.pre == 524_296_192
    bare = SideBytes(int(side), side.init, side.unit, side.root, side.logits)
    m, peak = reserve_factors(plan), st.peak
    with_pre = reserved_extra(m, peak.low, peak.high, st.steady, side)
    without = reserved_extra(m, peak.low, peak.high, st.steady, bare)
    assert (with_pre[0] - without[0], with_pre[1] - without[1]) == (524_296_192,) * 2
    # no offload, no pool
    off = resolved(with_values(plan, {"offload.params": "none"}))
    assert estimate(off).heaviest.totals.side.pre == 0  # type: ignore[attr-defined]
