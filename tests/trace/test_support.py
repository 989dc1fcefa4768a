"""What the trace refuses, and how the plan becomes a transformers model (no torch)."""

from __future__ import annotations

from typing import Any

import pytest

from engine.plan import Plan, with_values
from engine.trace import extra
from engine.trace.errors import TraceRefused
from engine.trace.hf_arch import hf_config_kwargs
from engine.trace.method import lora_module_names
from engine.trace.support import adjustments, refusal
from tests.trace.grid import tiny_arch


def _plan(**changes: Any) -> Plan:
    return with_values(Plan(), {k.replace("__", "."): v for k, v in changes.items()})


@pytest.mark.parametrize(
    ("changes", "words"),
    [
        ({"parallelism.strategy": "zero3"}, "DeepSpeed"),
        ({"stack.name": "megatron_core"}, "Megatron"),
        ({"parallelism.strategy": "fsdp1_full_shard"}, "FSDP1"),
        ({"offload.optimizer": "cpu"}, "offload"),
        ({"method.kind": "qlora"}, "CUDA-only"),
        ({"method.optimizer.name": "adam8bit"}, "bitsandbytes"),
        (
            {"method.optimizer.name": "adam8bit", "method.optimizer.adam8bit_library": "torchao"},
            "torchao",
        ),
        ({"method.optimizer.name": "lion"}, "Lion"),
        ({"method.precision.policy": "amp_master"}, "amp_master"),
        ({"runtime.attention": "flash_attn"}, "CUDA-only"),
        ({"runtime.attention": "flex"}, "torchtitan stack only"),
        ({"parallelism.pp": 2, "parallelism.dp": 4}, "pipeline"),
        ({"method.recompute.policy": "offload"}, "offload"),
        ({"parallelism.tp": 16, "parallelism.dp": 1}, "kv_heads"),
        ({"runtime.loss": "fused"}, "standard"),
        ({"method.kind": "lora", "method.lora.implementation": "litgpt"}, "LitGPT"),
    ],
)
def test_refusals_name_the_reason(changes: dict[str, Any], words: str) -> None:
    reason = refusal(with_values(Plan(), changes))
    assert reason is not None and words in reason


def test_default_plan_is_traceable() -> None:
    assert refusal(Plan()) is None


def test_gemma2_needs_eager_attention() -> None:
    arch = tiny_arch("gemma2").model_dump(mode="json")
    sdpa = with_values(Plan(), {"model.architecture": arch})
    assert "eager" in (refusal(sdpa) or "")
    eager = with_values(sdpa, {"runtime.attention": "eager"})
    assert refusal(eager) is None


def test_selective_recompute_is_traced_as_none_with_a_note() -> None:
    plan = with_values(Plan(), {"method.recompute.policy": "selective"})
    assert refusal(plan) is None
    assert any("selective" in n for n in adjustments(plan))


def test_hf_config_carries_the_spec_and_switches_off_sliding_windows() -> None:
    """Llama-3.1-8B's config.json fields come back under transformers' names."""
    model_type, kw = hf_config_kwargs(Plan().model.architecture)
    assert model_type == "llama"
    assert (kw["hidden_size"], kw["num_hidden_layers"], kw["num_key_value_heads"]) == (4096, 32, 8)
    assert (kw["intermediate_size"], kw["vocab_size"], kw["head_dim"]) == (14336, 128256, 128)
    assert kw["tie_word_embeddings"] is False and kw["attention_bias"] is False
    mistral_type, mistral = hf_config_kwargs(tiny_arch("mistral"))
    assert mistral_type == "mistral" and mistral["sliding_window"] is None
    gpt2_type, gpt2 = hf_config_kwargs(tiny_arch("gpt2"))
    assert gpt2_type == "gpt2" and gpt2["n_embd"] == 256 and gpt2["n_inner"] == 512


def test_a_spec_the_family_cannot_express_is_refused() -> None:
    arch = Plan().model.architecture.model_copy(update={"qkv_bias": True, "o_bias": False})
    with pytest.raises(TraceRefused, match="attention_bias"):
        hf_config_kwargs(arch)


def test_lora_targets_map_to_each_familys_module_names() -> None:
    """The ledger's target roles, by the inventory's (checkpoint) names."""
    llama = with_values(
        Plan(), {"method.kind": "lora", "model.architecture": tiny_arch("llama").model_dump()}
    )
    assert lora_module_names(llama)[:4] == [
        f"model.layers.0.self_attn.{p}_proj" for p in ("q", "k", "v", "o")
    ]
    gpt2 = with_values(
        llama,
        {
            "model.architecture": tiny_arch("gpt2").model_dump(),
            "method.lora.targets": ["qkv", "o", "down"],
        },
    )
    assert lora_module_names(gpt2)[:3] == [
        "h.0.attn.c_attn",  # GPT-2 checkpoints: no "transformer." prefix; PEFT matches suffixes
        "h.0.attn.c_proj",
        "h.0.mlp.c_proj",
    ]


def test_missing_extra_gives_the_install_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(extra.importlib.util, "find_spec", lambda name: None)
    assert extra.missing_packages() == ["torch", "transformers", "peft"]
    problem = extra.extra_problem()
    assert problem is not None and "pip install 'memplan[trace]'" in problem
    assert "torch==2.13.0" in problem and "\n" not in problem
    with pytest.raises(extra.TraceExtraMissing):
        extra.require_trace_extra()
