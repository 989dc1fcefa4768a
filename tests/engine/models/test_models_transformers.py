"""Our counts against transformers' own, on the meta device (needs torch + transformers).

For each published config in ``tests/data/configs`` (and for each family's config of
defaults only, ``{"model_type": X}``), transformers builds the model with
``AutoModelForCausalLM.from_config`` under ``torch.device("meta")`` (no memory, no
weights) and we sum ``numel`` over its unique parameters (tied ones once) and its
persistent buffers (DeepSeek-V3's router ``e_score_correction_bias`` is an fp32 buffer
in transformers 5, stored in the checkpoint; a parameter in DeepSeek's own code).
Multimodal wrappers count the language model only (``model.language_model`` and
``lm_head``), as our importer does. Skipped when torch or transformers is absent.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from engine.models import hf_dense, hf_moe
from engine.models.hf_config import import_hf_config
from engine.models.inventory import build_inventory, total_params
from tests.engine.models.config_formulas import NAMES, config

torch = pytest.importorskip("torch", exc_type=ImportError)
transformers = pytest.importorskip("transformers", exc_type=ImportError)

_VISION = ("vision_tower", "visual", "multi_modal_projector", "vision_model")


def transformers_count(cfg: Mapping[str, Any]) -> int:
    """Unique parameters + persistent buffers of the language model transformers builds."""
    doc = {k: v for k, v in cfg.items() if k != "quantization_config"}
    hf_cfg = transformers.AutoConfig.for_model(**doc)
    with torch.device("meta"):
        try:
            model = transformers.AutoModelForCausalLM.from_config(hf_cfg)
        except ValueError:  # Mistral-3, Qwen2.5-VL: image-text-to-text classes only
            model = transformers.AutoModelForImageTextToText.from_config(hf_cfg)
    seen: dict[int, int] = {}
    for name, p in model.named_parameters():
        if not any(v in name for v in _VISION):
            seen[id(p)] = p.numel()
    for name, module in model.named_modules():
        if any(v in name for v in _VISION):
            continue
        for key, buf in module._buffers.items():
            if buf is not None and key not in module._non_persistent_buffers_set:
                seen[id(buf)] = buf.numel()
    return sum(seen.values())


def ours(cfg: Mapping[str, Any]) -> int:
    return total_params(build_inventory(import_hf_config(cfg).spec))


@pytest.mark.parametrize("name", NAMES)
def test_published_config_matches_transformers(name: str) -> None:
    cfg = config(name)
    assert ours(cfg) == transformers_count(cfg)


_DEFAULT_ONLY = sorted(
    [
        "llama",
        "granite",
        "olmo2",
        "qwen3",
        "mistral",
        "phi3",
        "qwen2",
        "gemma2",
        "gemma3_text",
        "cohere",
        "cohere2",
        "starcoder2",
        "stablelm",
        "falcon",
        "gpt2",
        "gpt_neox",
        "mixtral",
        "phimoe",
        "qwen2_moe",
        "qwen3_moe",
        "granitemoe",
        "granitemoeshared",
        "llama4_text",
        "deepseek_v3",
        "gemma3",
        "mistral3",
        "qwen2_5_vl",
        "llama4",
    ]
)


@pytest.mark.parametrize("model_type", _DEFAULT_ONLY)
def test_absent_keys_take_transformers_defaults(model_type: str) -> None:
    """A config of nothing but ``model_type`` counts as transformers builds it.

    (DeepSeek-V2's default ``num_experts_per_tok`` is None, which cannot route: refused,
    see test_models_hf_config.)
    """
    cfg = {"model_type": model_type}
    assert ours(cfg) == transformers_count(cfg)


_TABLES: list[tuple[str, Mapping[str, Any]]] = [
    ("llama", hf_dense.LLAMA_DEFAULTS),
    ("mistral", hf_dense.MISTRAL_DEFAULTS),
    ("qwen2", hf_dense.QWEN2_DEFAULTS),
    ("qwen3", hf_dense.QWEN3_DEFAULTS),
    ("qwen2_5_vl_text", hf_dense.QWEN25_VL_TEXT_DEFAULTS),
    ("gemma2", hf_dense.GEMMA2_DEFAULTS),
    ("gemma3_text", hf_dense.GEMMA3_TEXT_DEFAULTS),
    ("phi3", hf_dense.PHI3_DEFAULTS),
    ("olmo2", hf_dense.OLMO2_DEFAULTS),
    ("granite", hf_dense.GRANITE_DEFAULTS),
    ("cohere", hf_dense.COHERE_DEFAULTS),
    ("cohere2", hf_dense.COHERE2_DEFAULTS),
    ("starcoder2", hf_dense.STARCODER2_DEFAULTS),
    ("stablelm", hf_dense.STABLELM_DEFAULTS),
    ("gpt_neox", hf_dense.GPT_NEOX_DEFAULTS),
    ("gpt2", hf_dense.GPT2_DEFAULTS),
    ("falcon", hf_dense.FALCON_DEFAULTS),
    ("mixtral", hf_moe.MIXTRAL_DEFAULTS),
    ("phimoe", hf_moe.PHIMOE_DEFAULTS),
    ("qwen3_moe", hf_moe.QWEN3_MOE_DEFAULTS),
    ("qwen2_moe", hf_moe.QWEN2_MOE_DEFAULTS),
    ("granitemoe", hf_moe.GRANITEMOE_DEFAULTS),
    ("llama4_text", hf_moe.LLAMA4_TEXT_DEFAULTS),
    ("deepseek_v2", hf_moe.DEEPSEEK_V2_DEFAULTS),
    ("deepseek_v3", hf_moe.DEEPSEEK_V3_DEFAULTS),
]


@pytest.mark.parametrize(("model_type", "table"), _TABLES, ids=[t[0] for t in _TABLES])
def test_default_tables_are_transformers_defaults(
    model_type: str, table: Mapping[str, Any]
) -> None:
    """Each value we default to is the one transformers' config class holds (keys whose
    default we leave None are derived after construction and checked by the counts)."""
    hf_cfg = transformers.AutoConfig.for_model(model_type)
    for key, value in table.items():
        if value is None or not hasattr(hf_cfg, key):
            continue
        assert getattr(hf_cfg, key) == value, key


@pytest.mark.parametrize(
    "family",
    ["mixtral", "qwen3_moe", "qwen2_moe", "granitemoe", "phimoe", "deepseek_v2", "deepseek_v3"],
)
def test_fused_experts_are_the_parameters_transformers_builds(family: str) -> None:
    """With ``expert_storage`` fused_gate_up the routed experts are exactly transformers
    5's ``<Family>Experts`` parameters (``gate_up_proj`` (E, 2I, h), ``down_proj``
    (E, h, I), e.g. ``modeling_mixtral.py`` ``MixtralExperts.__init__``), by name and
    shape, on the grid's tiny shapes built on the meta device."""
    from engine.trace.hf_arch import hf_config_kwargs
    from tests.trace.grid import tiny_arch

    arch = tiny_arch(family)
    assert arch.moe is not None
    moe = arch.moe.model_copy(update={"expert_storage": "fused_gate_up"})
    arch = arch.model_copy(update={"moe": moe})
    model_type, kwargs = hf_config_kwargs(arch)
    with torch.device("meta"):
        model = transformers.AutoModelForCausalLM.from_config(
            transformers.AutoConfig.for_model(model_type, **kwargs)
        )
    theirs = {
        n: tuple(p.shape)
        for n, p in model.named_parameters()
        if ".experts." in n and "shared" not in n
    }
    ours = {t.name: t.shape for t in build_inventory(arch) if ".experts." in t.name}
    assert ours == theirs
