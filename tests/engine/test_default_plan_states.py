"""The default plan's persistent rows, derived by hand and checked to the byte."""

from __future__ import annotations

from engine.estimate import estimate
from engine.plan import default_plan


def test_default_plan_persistent_states_exact() -> None:
    """Llama-3.1-8B has 8,030,261,248 parameters in 291 tensors (embedding, 32 layers ×
    9 tensors, final norm, lm_head). FSDP2 over 8 ranks chunks each tensor on dim 0; every
    dim 0 here (128256, 4096, 1024, 14336) divides by 8, so rank 0 holds exactly
    8,030,261,248 / 8 = 1,003,782,656 elements. Every shard is a multiple of 512 B.

    - fp32 sharded params (the master under MixedPrecisionPolicy): × 4 = 4,015,130,624 B
    - fp32 sharded grads: 4,015,130,624 B
    - AdamW exp_avg, exp_avg_sq (fp32): 4,015,130,624 B each
    - AdamW step: 291 tensors × 4 B, each rounded to 512 B = 148,992 B
    These equal the measured llama-8b ws8 case: params 4,015,130,624, grads
    4,015,130,624, optimizer 8,030,410,240 = 2 × 4,015,130,624 + 148,992.
    """
    rows = {
        r.id: r
        for r in estimate(default_plan()).rows
        if r.kind == "persistent" and r.group in ("weights", "gradients", "optimizer")
    }
    assert rows["hbm.weights"].low == rows["hbm.weights"].high == 4_015_130_624
    assert rows["hbm.grads"].low == 4_015_130_624
    assert rows["hbm.optimizer.exp_avg"].low == 4_015_130_624
    assert rows["hbm.optimizer.exp_avg_sq"].low == 4_015_130_624
    assert rows["hbm.optimizer.step"].low == 148_992
    assert all(r.location == "hbm" and r.kind == "persistent" for r in rows.values())
    assert all(r.formula and r.source for r in rows.values())
    assert "8,030,261,248" in rows["hbm.grads"].formula
