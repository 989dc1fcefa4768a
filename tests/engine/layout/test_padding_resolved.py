"""The layout search judges FSDP padding on the tensors the ledger shards: the resolved
architecture, where a stack stores a layer's routed experts as one tensor of all experts
(transformers' fused ``gate_up_proj`` [E, 2·I, H] and ``down_proj`` [E, H, I]), not one
tensor per expert as an unresolved ``auto`` storage reads.

Mixtral-8x7B (E = 8 experts, H = 4,096, I = 14,336) under FSDP2 at DP 3: FSDP2 chunks
dim 0 into 3 (``torch/distributed/fsdp/_fully_shard/_fsdp_param.py``,
``FSDPParam._init_sharded_param``), so each expert tensor's 8 rows become ⌈8/3⌉·3 = 9:
one row of padding per expert tensor, 3·I·H elements over the layer's 8·3·I·H expert
elements. The attention, router and norm tensors (≈ 10,240·H elements, 4,096 / 1,024
rows) pad by at most 2 rows each, so the layer's padding share is just under
3·I·H / (9·3·I·H + 10,240·H) = 43,008 / 397,312 ≈ 10.8 % — over the 5 % preference,
where one tensor per expert (14,336 rows over 3: one row of 4,096) would read ≈ 0.01 %.
"""

from __future__ import annotations

from engine.layout.candidates import padding_context, problems_in, share_in
from engine.layout.point import Layout
from engine.presets import plan_for_model_preset
from engine.stacks.defaults import resolved

HIDDEN, INTER = 4096, 14336


def test_fused_experts_pad_as_the_ledger_shards_them() -> None:
    plan = plan_for_model_preset("mixtral-8x7b")
    assert plan.model.architecture.moe is not None
    assert plan.model.architecture.moe.expert_storage == "auto"
    arch = resolved(plan).model.architecture
    assert arch.moe is not None and arch.moe.expert_storage == "fused_gate_up"
    pad, padded = share_in(padding_context(plan), Layout(tp=1, pp=1, cp=1, ep=1, dp=3))
    expert_share = 3 * INTER * HIDDEN / (9 * 3 * INTER * HIDDEN + 10240 * HIDDEN)
    assert 0.98 * expert_share < pad / padded < 1 / 9
    assert problems_in(padding_context(plan), Layout(tp=1, pp=1, cp=1, ep=1, dp=3), 0.05)
    # DP 8 divides the 8 experts: no expert padding; only the small dense tensors pad.
    pad8, padded8 = share_in(padding_context(plan), Layout(tp=1, pp=1, cp=1, ep=1, dp=8))
    assert pad8 / padded8 < 0.001
