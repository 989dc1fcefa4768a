"""torchtitan's MoE block (Qwen3-30B-A3B layers), hand-derived from torchtitan 0.3.0.

Files: ``torchtitan/models/common/moe.py`` (``TokenChoiceTopKRouter.forward``,
``GroupedExperts.forward``, ``MoE.forward``), ``models/common/token_dispatcher.py``
(``LocalTokenDispatcher._local_reorder`` / ``combine``), ``ops/scatter_add.py``,
``models/qwen3/__init__.py`` (``score_func="softmax"``, ``route_norm=True``) and
``distributed/activation_checkpoint.py`` (``_get_default_save_ops``,
``force_recompute_mm_shapes_by_fqns = ["moe.router.gate"]``).

Qwen3-30B-A3B: h 2048, 32 heads and 4 KV heads of 128, 128 experts of F = 768, top-8;
bf16 compute (c = 2), bf16 residual (r = 2). Bytes a token, S = 512 (every per-token
term a multiple of the 512-B granularity):

- attention half (qk_norm, flex): q_norm input 4096·2 = 8,192 + rstd 32·4 = 128; k_norm
  input 512·2 = 1,024 + rstd 4·4 = 16; attention_norm input 4,096 + rstd 4; its output
  4,096; q 8,192; k, v 2·1,024; output 8,192; log-sum-exp 128; flex row max 128:
  36,244;
- MoE half: ffn_norm input 4,096 + rstd 4; gate fp32 input copy 2048·4 = 8,192; softmax
  128·4 = 512; top-k ids 8·8 = 64; route_norm weights + sum 9·4 = 36; argsort and
  ``// top_k`` 2·8·8 = 128; gathered tokens 8·2048·2 = 32,768; w1 out, silu out, w3 out,
  product 4·8·768·2 = 49,152; fp32 expert outputs 8·2048·4 = 65,536; sorted scores 8·4
  = 32: 160,520;
- a layer's constants: the gate's fp32 weight copy 128·2048·4 = 1,048,576 and the int32
  offsets 128·4 = 512.

The trace (``tests/fidelity_grid.py --titan --families qwen3_moe``, s 2048) measures
the per-layer figures in docs/fidelity-grid.md.
"""

from __future__ import annotations

from engine.ledger.activations import titan_moe as tm
from engine.ledger.activations.geometry import geometry, terms_bytes
from engine.ledger.activations.stage_layers import stage_layers
from engine.plan import Plan, with_values
from engine.stacks.defaults import resolved
from tests.trace.titan_grid import TitanCase

S = 512
ATTENTION = 36_244
MOE = 160_520
CONST = 1_048_576 + 512
FREED = 49_152 + 65_536 + 32
"""What the experts' backward has freed by w1's grouped mm backward."""
SAC = 4_096 + (4_096 + 2 * 512) * 2 + 8_192 + 128 + 128 + 8 * 4 + 8 * 8
"""Per-op SAC: block input, wqkv's output (mm 1), flex out / lse / max, topk values and
ids (the gate is force-recomputed and ``_grouped_mm`` is not on the save list)."""
EXPERT_GRADS = 128 * 3 * 768 * 2048 * 2
"""w1, w2, w3 unsharded bf16 grads of all 128 experts (FSDP2 × 8, no EP)."""


def _plan(ac: str) -> Plan:
    return resolved(TitanCase("qwen3_moe", 2, S, 1, 8, ac, "standard").plan())


def test_no_ac_saved_set() -> None:
    plan = _plan("none")
    sl, g = stage_layers(plan, 0), geometry(plan)
    assert [k.name for k in sl.kinds] == ["MoE"] and sl.n_ckpt == 0
    assert terms_bytes(sl.kinds[0].terms, g) == (ATTENTION + MOE) * S + CONST


def test_op_sac_keeps_topk_not_the_experts() -> None:
    plan = _plan("sac_op")
    sl, g = stage_layers(plan, 0), geometry(plan)
    assert sl.n_ckpt == 2
    assert terms_bytes(sl.ckpt, g) == SAC * S == 22_880 * S


def test_working_set_at_w1_grouped_mm_backward() -> None:
    """Live: the layer's output grad 2048·2, w3's and w1's input grads 2·8·2048·2, silu's
    grad 8·768·2 (81,920 a token) and the experts' grads; less the freed saved tensors;
    plus ``own`` (the caller nets the layer's own saved set out)."""
    plan = _plan("full")
    at = tm.working_at(plan)
    assert at is not None
    n, _, freed = at(geometry(plan), 7)
    assert freed == 0
    assert n == (81_920 - FREED) * S + EXPERT_GRADS + 7


def test_only_torchtitan_moe_plans_get_the_candidate() -> None:
    dense = resolved(TitanCase("qwen3", 2, S, 1, 8, "full", "standard").plan())
    assert tm.working_at(dense) is None
    hf = with_values(_plan("full"), {"runtime.activation_profile": "hf-transformers"})
    assert tm.working_at(hf) is None


def test_no_root_grads_row_under_torchtitans_split_units() -> None:
    """torchtitan ≥ 0.2 shards [norm, output] as a unit of its own under FSDP2: its grads
    are reduce-scattered at its own post-backward, so none waits through the layers'
    backward (traced: no 151,936 × 2,048 × 2 = 622,329,856-B grad live at layer 0's
    backward); the layers' reduce-scatter row stays."""
    from engine.estimate import estimate

    ids = {r.id for r in estimate(_plan("none")).heaviest.rows}
    assert "hbm.buckets.root_grads" not in ids
    assert "hbm.buckets.reduce_scatter" in ids
