"""Megatron-Core ``--recompute-modules`` (engine/ledger/activations/recompute_modules.py),
following megatron/core/transformer/transformer_config.py ``recompute_modules`` (default
``["core_attn"]``; ``layernorm`` discards the norms' outputs, ``mlp`` checkpoints the
dense MLP) over the megatron profile's Korthikanti terms."""

from __future__ import annotations

from engine.ledger.activations import megatron as mg
from engine.ledger.activations.geometry import geometry
from engine.ledger.activations.recompute_modules import DROPPED, terms_key
from engine.ledger.activations.stage_layers import stage_layers
from engine.plan import Plan, default_plan, with_values
from engine.stacks.defaults import resolved

MEGATRON = {
    "stack.name": "megatron_core",
    "parallelism.strategy": "megatron_distopt",
    "method.recompute.policy": "selective",
    "batch.seq_len": 1024,
}


def _plan(*modules: str) -> Plan:
    return resolved(with_values(default_plan(), {**MEGATRON, "method.recompute.modules": modules}))


def test_dropped_names_are_the_profiles_terms() -> None:
    """A renamed term in the megatron profile must not silently stop being dropped."""
    g = geometry(_plan("core_attn"))
    names = {
        t.name
        for mlp in ("gelu", "swiglu")
        for t in mg.layer_terms(g, mlp=mlp, attention="eager", selective=False, dropout=True)
    }
    assert set().union(*DROPPED.values()) <= names


def test_layernorm_and_mlp_drop_their_tensors() -> None:
    """Default plan (Llama-3-8B shape: h 4096, SwiGLU i 14336), bf16, 1 × 1024 tokens, no
    TP. layernorm drops the QKV and MLP inputs: 2 × 1024 × 4096 × 2 = 16,777,216 B a
    layer; mlp drops fc1's output (2 × 14336) and the SwiGLU output (14336):
    1024 × 3 × 14336 × 2 = 88,080,384 B a layer; with both, the MLP input goes once."""
    base = stage_layers(_plan("core_attn"), 0).kinds[0].bytes
    ln = stage_layers(_plan("core_attn", "layernorm"), 0).kinds[0].bytes
    mlp = stage_layers(_plan("core_attn", "mlp"), 0).kinds[0].bytes
    both = stage_layers(_plan("core_attn", "layernorm", "mlp"), 0).kinds[0].bytes
    assert base - ln == 16_777_216
    assert base - mlp == 88_080_384
    assert base - both == 16_777_216 + 88_080_384


def test_default_key_is_the_plain_policy_and_hf_ignores_modules() -> None:
    """Megatron's default list keeps the key "selective" (caches shared as before); the
    hf-transformers profile reads no modules."""
    assert terms_key(_plan("core_attn").method.recompute, True) == "selective"
    assert terms_key(_plan("mlp", "core_attn").method.recompute, True) == "selective[core_attn+mlp]"
    hf = {**MEGATRON, "stack.name": "pytorch", "parallelism.strategy": "fsdp2"}
    a = resolved(with_values(default_plan(), {**hf, "method.recompute.modules": ("core_attn",)}))
    b = resolved(with_values(default_plan(), {**hf, "method.recompute.modules": ("mlp",)}))
    assert stage_layers(a, 0) == stage_layers(b, 0)
