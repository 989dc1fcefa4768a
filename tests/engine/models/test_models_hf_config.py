"""config.json import: each family's keys, and one clear sentence for every bad input."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from engine.models.hf_config import ConfigImportError, load_hf_config, spec_from_hf_config
from engine.models.inventory import build_inventory, total_params
from engine.models.presets import load_preset

LLAMA_31_8B: dict[str, Any] = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "hidden_size": 4096,
    "num_hidden_layers": 32,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "intermediate_size": 14336,
    "vocab_size": 128256,
    "max_position_embeddings": 131072,
    "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
    "hidden_act": "silu",
    "rope_scaling": {"factor": 8.0, "rope_type": "llama3"},
    "attention_bias": False,
}


def test_llama_config_matches_preset(tmp_path: Path) -> None:
    """Llama-3.1-8B's config.json gives the preset exactly (8,030,261,248 params)."""
    (tmp_path / "config.json").write_text(json.dumps(LLAMA_31_8B))
    spec = load_hf_config(tmp_path)
    assert spec == load_preset("llama-3.1-8b")[1]
    assert total_params(build_inventory(spec)) == 8_030_261_248


def test_gpt2_config() -> None:
    """GPT-2 keys (n_embd, n_layer, n_head, n_inner=None → 4h) give 124,439,808."""
    cfg = {
        "model_type": "gpt2",
        "n_embd": 768,
        "n_layer": 12,
        "n_head": 12,
        "n_inner": None,
        "vocab_size": 50257,
        "n_positions": 1024,
    }
    spec = spec_from_hf_config(cfg)
    assert spec.intermediate == 3072 and spec.stored_dtype == "fp32"
    assert total_params(build_inventory(spec)) == 124_439_808


def test_family_quirks() -> None:
    base = {k: v for k, v in LLAMA_31_8B.items() if k != "model_type"}
    assert spec_from_hf_config({**base, "model_type": "qwen2"}).qkv_bias
    assert spec_from_hf_config({**base, "model_type": "qwen3"}).qk_norm
    phi = spec_from_hf_config({**base, "model_type": "phi3"})
    assert phi.fused_qkv and phi.fused_gate_up
    gemma = spec_from_hf_config({**base, "model_type": "gemma2", "tie_word_embeddings": None})
    assert gemma.sandwich_norm and gemma.tied_embeddings and gemma.head_dim == 256
    assert spec_from_hf_config({**base, "model_type": "gemma3_text"}).qk_norm


@pytest.mark.parametrize(
    ("cfg", "message"),
    [
        ({"hidden_size": 4}, "missing the key 'model_type'"),
        ({"model_type": "mamba"}, "'model_type' = 'mamba' is not supported"),
        ({**LLAMA_31_8B, "hidden_size": None}, "'hidden_size' is null"),
        ({**LLAMA_31_8B, "num_hidden_layers": "32"}, "'num_hidden_layers' must be an integer"),
        ({**LLAMA_31_8B, "num_key_value_heads": 5}, "kv_heads"),
        ({**LLAMA_31_8B, "torch_dtype": "float8"}, "'torch_dtype'"),
        ({**LLAMA_31_8B, "tie_word_embeddings": "no"}, "'tie_word_embeddings' must be true"),
        (
            {
                **LLAMA_31_8B,
                "model_type": "qwen3_moe",
                "num_experts": 8,
                "num_experts_per_tok": 2,
                "moe_intermediate_size": 64,
                "mlp_only_layers": [1],
            },
            "'mlp_only_layers'",
        ),
        ({"model_type": "falcon", "alibi": True}, "'alibi'"),
        ({"model_type": "deepseek_v2"}, "missing the key 'num_experts_per_tok'"),
        ({"model_type": "deepseek_v2", "num_experts_per_tok": 6, "mlp_bias": True}, "'mlp_bias'"),
        ({"model_type": "llama4_text", "moe_layers": [0, 5]}, "'moe_layers'"),
        ({"model_type": "deepseek_v3", "moe_layer_freq": 2}, "'moe_layer_freq'"),
        ({"model_type": "mistral3", "text_config": [1]}, "'text_config'"),
        ({**LLAMA_31_8B, "text_config": {}}, "'text_config'"),
        ({**LLAMA_31_8B, "quantization_config": {"quant_method": "gptq"}}, "'quantization_config'"),
    ],
)
def test_bad_configs_name_the_key(cfg: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigImportError, match=message):
        spec_from_hf_config(cfg)


def test_unreadable_files(tmp_path: Path) -> None:
    with pytest.raises(ConfigImportError, match="cannot read"):
        load_hf_config(tmp_path)
    (tmp_path / "config.json").write_text("{not json")
    with pytest.raises(ConfigImportError, match="not valid JSON"):
        load_hf_config(tmp_path / "config.json")
    (tmp_path / "config.json").write_text("[1, 2]")
    with pytest.raises(ConfigImportError, match="JSON object"):
        load_hf_config(tmp_path)


def test_absent_keys_take_the_familys_transformers_default() -> None:
    """A Qwen3 config without head_dim gets Qwen3Config's 128, not hidden / heads.

    h = 2048, a = 32: hidden / heads would be 64 and q = 32·64 = 2048; with 128, q and o
    are 32·128·2048 each. Gemma keeps 256; a Qwen3-MoE file without head_dim uses
    hidden / heads (Qwen3MoeConfig declares none).
    """
    base = {"hidden_size": 2048, "num_attention_heads": 32, "num_key_value_heads": 4}
    assert spec_from_hf_config({"model_type": "qwen3", **base}).dim_per_head == 128
    assert spec_from_hf_config({"model_type": "qwen3_moe", **base}).dim_per_head == 64
    assert spec_from_hf_config({"model_type": "gemma2", **base}).dim_per_head == 256
    llama = spec_from_hf_config({"model_type": "llama"})
    assert (llama.hidden, llama.layers, llama.vocab, llama.kv_heads) == (4096, 32, 32000, 32)


def test_family_layout_switches() -> None:
    """Falcon's norms and kv heads, StableLM's and Cohere's parallel residual, Qwen2-MoE's
    gated shared expert, Llama-4's interleaved MoE layers, each as its config says."""
    f7 = spec_from_hf_config({"model_type": "falcon"})
    assert (f7.kv_heads, f7.residual, f7.tied_embeddings) == (1, "parallel", True)
    f40 = spec_from_hf_config({"model_type": "falcon", "new_decoder_architecture": True})
    assert (f40.kv_heads, f40.residual) == (71, "parallel_two_norms")
    seq = spec_from_hf_config({"model_type": "falcon", "parallel_attn": False})
    assert seq.residual == "sequential"
    slm = spec_from_hf_config({"model_type": "stablelm", "use_parallel_residual": True})
    assert slm.residual == "parallel" and slm.norm == "layernorm" and slm.norm_bias
    assert spec_from_hf_config({"model_type": "cohere"}).residual == "parallel"
    q2 = spec_from_hf_config({"model_type": "qwen2_moe", "decoder_sparse_step": 2})
    assert q2.moe is not None and q2.moe.shared_expert_gate and q2.moe.layer_step == 2
    l4 = spec_from_hf_config({"model_type": "llama4_text", "interleave_moe_layer_step": 2})
    assert l4.moe is not None and [l4.moe.is_moe_layer(i) for i in range(4)] == [
        False,
        True,
        False,
        True,
    ]
