"""torch.compile lowers the saved layers' low end by the fused RMSNorm / SwiGLU
intermediates (engine/ledger/activations/compiled.py), following AOT Autograd's
``min_cut_rematerialization_partition`` (torch/_functorch/partitioners.py) over
transformers' ``LlamaRMSNorm.forward`` and ``LlamaMLP.forward`` (modeling_llama.py)."""

from __future__ import annotations

from ledger_plans import SMOL

from engine.estimate import estimate
from engine.ledger.activations.rows import activation_rows
from engine.ledger.activations.stage_layers import stage_layers
from engine.ledger.row import Row
from engine.plan import Plan, default_plan, with_values
from engine.stacks.defaults import resolved

BASE = {
    "model.preset": None,
    "model.name": "SmolLM-135M",
    **{f"model.architecture.{k}": v for k, v in SMOL.items()},
    "method.precision.policy": "pure_16bit",
    "method.recompute.policy": "none",
    "batch.micro_batch": 2,
    "batch.seq_len": 1024,
}


def _plan(**extra: object) -> Plan:
    return with_values(default_plan(), {**BASE, **extra})


def _saved(plan: Plan) -> Row:
    return next(r for r in estimate(plan).rows if r.id == "hbm.activations.saved.layers")


def test_compile_lowers_the_low_end_by_the_fused_intermediates() -> None:
    """SmolLM-135M (h 576, i 1536, 30 layers), bf16 full fine-tune, b 2 × s 1024 = 2048
    tokens. Per layer the compiled step does not keep:
      2 norm sites × 576 × (4 − 2) B × 2048 (fp32 upcast → bf16 input) =  4,718,592
      2 norm sites × 576 × 2 B × 2048 (normalised; the norms train)   =  4,718,592
      2 × 1536 × 2 B × 2048 (act(gate) and the gate·up product)       = 12,582,912
    = 22,020,096 B a layer, × 30 layers = 660,602,880 B. The low end is the band's low
    factor (0.98) of what remains; the high end is the eager one."""
    eager, compiled = _plan(), _plan(**{"workload.torch_compile": True})
    one = stage_layers(resolved(eager), 0).one_bytes
    removed = 30 * 22_020_096
    e, c = _saved(eager), _saved(compiled)
    assert c.high == e.high == int(one * 1.05)
    assert e.low == int(one * 0.98)
    assert c.low == int((one - removed) * 0.98)
    assert "torch.compile" in c.formula and "660,602,880" in c.formula


def test_frozen_norms_keep_their_normalised_tensor_out_of_the_count() -> None:
    """LoRA freezes the norms: no normalised tensor is kept eagerly, so only the upcast
    and the SwiGLU pair come off: 4,718,592 + 12,582,912 = 17,301,504 B a layer, on the
    29 layers after the first (layer 0 after the frozen embedding keeps less: capped at
    what it keeps)."""
    lora = {"method.kind": "lora", "method.lora.targets": ["q", "v", "gate", "up", "down"]}
    eager, compiled = _plan(**lora), _plan(**lora, **{"workload.torch_compile": True})
    sl = stage_layers(resolved(eager), 0)
    removed = min(sl.plain_bytes, sum(k.saved for k in sl.kinds) * 17_301_504)
    assert _saved(compiled).low == int((sl.one_bytes - removed) * 0.98)


def test_uncovered_families_keep_eager_figures() -> None:
    """GPT-2 (LayerNorm, gelu_new) and the megatron profile are outside the model: rows
    identical (full recompute: tests/engine/ledger/test_compiled_recompute.py)."""
    for extra in (
        {
            "model.architecture.family": "gpt2",
            "model.architecture.mlp": "gelu",
            "model.architecture.fused_qkv": True,
        },
        {"runtime.activation_profile": "megatron"},
    ):
        eager = _plan(**extra)
        compiled = _plan(**extra, **{"workload.torch_compile": True})
        assert [(r.id, r.low, r.high) for r in estimate(compiled).rows] == [
            (r.id, r.low, r.high) for r in estimate(eager).rows
        ]


def test_row_and_folded_sum_agree() -> None:
    """The row built by activation_rows carries the same low end as the estimate's sum."""
    plan = resolved(_plan(**{"workload.torch_compile": True}))
    sl = stage_layers(plan, 0)
    rows = activation_rows(plan, 0, sl.n_layers, ())
    row = next(r for r in rows if r.id == "hbm.activations.saved.layers")
    assert row.low == _saved(plan).low
