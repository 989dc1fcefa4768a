"""Every preset's total equals its authors' published count, exactly.

Each case carries the hand derivation from the repo's config.json as plain arithmetic
(V vocab, h hidden, L layers, q = heads·head_dim, kv = kv_heads·head_dim, I intermediate;
per layer: attention + MLP + norms) and the published figure's source. Where the only
published figure is rounded (GPT-2 "124M", SmolLM "135M", DeepSeek-V3 "671B"/"685B"),
the exact count is derived from the config and the comment says how it reconciles.
"""

from __future__ import annotations

import pytest

from engine.models.inventory import build_inventory, total_params
from engine.models.presets import (
    PresetError,
    format_models_table,
    list_presets,
    load_preset,
    preset_names,
)
from engine.models.summary import summarize
from engine.sections.model import LLAMA_31_8B

HF = "Hugging Face safetensors metadata (model page exact count)"

# DeepSeek-V3 MLA attention per layer: q_a 1536·7168 + q_a norm 1536 + q_b (128·192)·1536
# + kv_a (512+64)·7168 + kv_a norm 512 + kv_b (128·256)·512 + o 7168·(128·128).
DSV3_ATTN = 1536 * 7168 + 1536 + 24576 * 1536 + 576 * 7168 + 512 + 32768 * 512 + 7168 * 16384
# One MoE feed-forward: 256 routed + 1 shared expert of 3·7168·2048, router 256·7168 + bias 256.
DSV3_MOE = 257 * 3 * 7168 * 2048 + 256 * 7168 + 256
DSV3_MAIN = (
    2 * 129280 * 7168 + 7168 + 61 * (DSV3_ATTN + 2 * 7168) + 3 * (3 * 7168 * 18432) + 58 * DSV3_MOE
)
# MTP module's unique parameters: enorm, hnorm, head norm, eh_proj 7168·14336, and one full
# MoE decoder layer; its embedding and head are the main model's (DeepSeek's
# README_WEIGHTS.md), although the checkpoint stores copies of both (2·129280·7168).
DSV3_MTP = 3 * 7168 + 7168 * 14336 + DSV3_ATTN + 2 * 7168 + DSV3_MOE
DSV3_MTP_COPIES = 2 * 129280 * 7168

CASES: list[tuple[str, int, int, str]] = [
    # name, published exact total, derivation from config.json, source
    (
        "gpt2",
        124_439_808,
        # wte V·h + wpe 1024·h; per layer ln_1, ln_2 (w+b) 4h, c_attn 3h·h+3h, c_proj h·h+h,
        # c_fc 4h·h+4h, mlp c_proj 4h·h+h; ln_f 2h; tied head.
        50257 * 768
        + 1024 * 768
        + 12
        * (
            4 * 768
            + 3 * 768 * 768
            + 3 * 768
            + 768 * 768
            + 768
            + 4 * 768 * 768
            + 4 * 768
            + 4 * 768 * 768
            + 768
        )
        + 2 * 768,
        "card says 124M; safetensors total 137,022,720 minus 12 causal masks of 1024·1024",
    ),
    (
        "pythia-6.9b",
        6_857_302_016,
        2 * 50432 * 4096
        + 32
        * (
            4 * 4096
            + 3 * 4096 * 4096
            + 3 * 4096
            + 4096 * 4096
            + 4096
            + 2 * 16384 * 4096
            + 16384
            + 4096
        )
        + 2 * 4096,
        "Pythia model card table",
    ),
    (
        "smollm-135m",
        134_515_008,
        49152 * 576 + 30 * (2 * 576 * 576 + 2 * 192 * 576 + 3 * 576 * 1536 + 2 * 576) + 576,
        HF + " (card: 135M)",
    ),
    (
        "llama-2-7b",
        6_738_415_616,
        2 * 32000 * 4096 + 32 * (4 * 4096 * 4096 + 3 * 4096 * 11008 + 2 * 4096) + 4096,
        HF,
    ),
    (
        "llama-3.2-1b",
        1_235_814_400,
        128256 * 2048 + 16 * (2 * 2048 * 2048 + 2 * 512 * 2048 + 3 * 2048 * 8192 + 2 * 2048) + 2048,
        HF,
    ),
    (
        "llama-3.2-3b",
        3_212_749_824,
        128256 * 3072
        + 28 * (2 * 3072 * 3072 + 2 * 1024 * 3072 + 3 * 3072 * 8192 + 2 * 3072)
        + 3072,
        HF,
    ),
    (
        "llama-3.1-8b",
        8_030_261_248,
        2 * 128256 * 4096
        + 32 * (2 * 4096 * 4096 + 2 * 1024 * 4096 + 3 * 4096 * 14336 + 2 * 4096)
        + 4096,
        HF + "; index total_size 16,060,522,496 / 2",
    ),
    (
        "llama-3.1-70b",
        70_553_706_496,
        2 * 128256 * 8192
        + 80 * (2 * 8192 * 8192 + 2 * 1024 * 8192 + 3 * 8192 * 28672 + 2 * 8192)
        + 8192,
        HF,
    ),
    (
        "llama-3.1-405b",
        405_853_388_800,
        2 * 128256 * 16384
        + 126 * (2 * 16384 * 16384 + 2 * 1024 * 16384 + 3 * 16384 * 53248 + 2 * 16384)
        + 16384,
        HF,
    ),
    (
        "mistral-7b",
        7_241_732_096,
        2 * 32000 * 4096
        + 32 * (2 * 4096 * 4096 + 2 * 1024 * 4096 + 3 * 4096 * 14336 + 2 * 4096)
        + 4096,
        HF + "; also GGUF general.parameter_count",
    ),
    (
        "mistral-nemo-12b",
        12_247_782_400,
        # head_dim 128: q = 32·128 = 4096 ≠ h = 5120.
        2 * 131072 * 5120
        + 40 * (2 * 4096 * 5120 + 2 * 1024 * 5120 + 3 * 5120 * 14336 + 2 * 5120)
        + 5120,
        HF,
    ),
    (
        "qwen2.5-0.5b",
        494_032_768,
        # tied; q/k/v biases 896 + 2·128.
        151936 * 896
        + 24 * (2 * 896 * 896 + 2 * 128 * 896 + 896 + 2 * 128 + 3 * 896 * 4864 + 2 * 896)
        + 896,
        HF,
    ),
    (
        "qwen2.5-7b",
        7_615_616_512,
        2 * 152064 * 3584
        + 28 * (2 * 3584 * 3584 + 2 * 512 * 3584 + 3584 + 2 * 512 + 3 * 3584 * 18944 + 2 * 3584)
        + 3584,
        HF,
    ),
    (
        "qwen2.5-72b",
        72_706_203_648,
        2 * 152064 * 8192
        + 80 * (2 * 8192 * 8192 + 2 * 1024 * 8192 + 8192 + 2 * 1024 + 3 * 8192 * 29568 + 2 * 8192)
        + 8192,
        HF,
    ),
    (
        "qwen3-8b",
        8_190_735_360,
        # q/k norms of head_dim 128 each.
        2 * 151936 * 4096
        + 36 * (2 * 4096 * 4096 + 2 * 1024 * 4096 + 2 * 128 + 3 * 4096 * 12288 + 2 * 4096)
        + 4096,
        HF,
    ),
    (
        "qwen3-30b-a3b",
        30_532_122_624,
        # q = 32·128 = 4096 > h = 2048; router 128·h; 128 experts of 3·h·768.
        2 * 151936 * 2048
        + 48
        * (
            2 * 4096 * 2048
            + 2 * 512 * 2048
            + 2 * 128
            + 128 * 2048
            + 128 * 3 * 2048 * 768
            + 2 * 2048
        )
        + 2048,
        HF,
    ),
    (
        "gemma-2-2b",
        2_614_341_888,
        # tied; q = 8·256, kv = 4·256; four norms per layer (sandwich).
        256000 * 2304
        + 26 * (2 * 2048 * 2304 + 2 * 1024 * 2304 + 3 * 2304 * 9216 + 4 * 2304)
        + 2304,
        HF,
    ),
    (
        "gemma-2-9b",
        9_241_705_984,
        256000 * 3584
        + 42 * (2 * 4096 * 3584 + 2 * 2048 * 3584 + 3 * 3584 * 14336 + 4 * 3584)
        + 3584,
        HF,
    ),
    (
        "gemma-2-27b",
        27_227_128_320,
        256000 * 4608
        + 46 * (2 * 4096 * 4608 + 2 * 2048 * 4608 + 3 * 4608 * 36864 + 4 * 4608)
        + 4608,
        HF,
    ),
    (
        "gemma-3-1b",
        999_885_952,
        # q = 4·256, kv = 1·256, q/k norms 2·256, four norms.
        262144 * 1152
        + 26 * (2 * 1024 * 1152 + 2 * 256 * 1152 + 2 * 256 + 3 * 1152 * 6912 + 4 * 1152)
        + 1152,
        HF,
    ),
    (
        "phi-3-mini",
        3_821_079_552,
        # fused qkv 3h·h, fused gate_up 2I·h.
        2 * 32064 * 3072
        + 32 * (3 * 3072 * 3072 + 3072 * 3072 + 2 * 8192 * 3072 + 8192 * 3072 + 2 * 3072)
        + 3072,
        HF,
    ),
    (
        "mixtral-8x7b",
        46_702_792_704,
        2 * 32000 * 4096
        + 32 * (2 * 4096 * 4096 + 2 * 1024 * 4096 + 8 * 4096 + 8 * 3 * 4096 * 14336 + 2 * 4096)
        + 4096,
        HF,
    ),
    (
        "mixtral-8x22b",
        140_620_634_112,
        2 * 32000 * 6144
        + 56 * (2 * 6144 * 6144 + 2 * 1024 * 6144 + 8 * 6144 + 8 * 3 * 6144 * 16384 + 2 * 6144)
        + 6144,
        HF,
    ),
    (
        "deepseek-v3",
        671_026_419_200,
        DSV3_MAIN,
        "derived: safetensors total 684,531,386,000 minus 41,540,496 fp32 FP8 block scales "
        "minus the MTP layer transformers does not build",
    ),
]


def test_cases_are_presets() -> None:
    """Each case below is a preset (every preset is also in test_models_configs' table)."""
    assert {c[0] for c in CASES} <= set(preset_names())


@pytest.mark.parametrize(
    ("name", "published", "derived", "source"), CASES, ids=[c[0] for c in CASES]
)
def test_preset_total_is_exact(name: str, published: int, derived: int, source: str) -> None:
    """Computed inventory == hand derivation == published figure (see ``source``)."""
    assert derived == published, source
    _, spec = load_preset(name)
    assert total_params(build_inventory(spec)) == published
    info = next(i for i in list_presets() if i.name == name)
    assert info.total == info.published_total == published


def test_deepseek_v3_main_model_and_fp8_scales() -> None:
    """DeepSeek-V3: main model 671,026,419,200 (the paper's "671B"); MTP off by default.

    The hub's 684,531,386,000 stored elements = main model + MTP layer 61 as stored
    (11,610,068,224 unique + 1,853,358,080 embedding/head copies = 13,463,426,304) + one
    fp32 scale per 128×128 block of every FP8 weight. Per layer: q_a 12·56 + q_b 192·12
    + kv_a 5·56 + kv_b 256·4 + o 56·128 = 11,448; dense MLP 3·(144·56) = 24,192; MoE
    257·3·(16·56) = 690,816. 61·11,448 + 3·24,192 + 58·690,816 + MTP (11,448 + 690,816)
    = 41,540,496. With ``mtp_layers=1`` the total is 671,026,419,200 + 11,610,068,224.
    """
    _, spec = load_preset("deepseek-v3")
    s = summarize(spec)
    assert DSV3_MAIN == 671_026_419_200 == s.total == s.main_model
    assert spec.mtp_layers == 0 and s.mtp == 0
    on = summarize(spec.model_copy(update={"mtp_layers": 1}))
    assert DSV3_MTP == 11_610_068_224 == on.mtp
    assert on.total == 682_636_487_424 and on.main_model == DSV3_MAIN
    inv = build_inventory(spec.model_copy(update={"mtp_layers": 1}))
    scales = sum(
        -(-t.shape[0] // 128) * -(-t.shape[1] // 128) for t in inv if t.dtype == "fp8_e4m3"
    )
    assert scales == 41_540_496
    assert on.total + DSV3_MTP_COPIES + scales == 684_531_386_000


@pytest.mark.parametrize(
    ("name", "active", "note"),
    [
        # total − (E − k) inactive routed experts per MoE layer
        ("mixtral-8x7b", 46_702_792_704 - 32 * 6 * 3 * 4096 * 14336, "card: 12.9B active"),
        ("mixtral-8x22b", 140_620_634_112 - 56 * 6 * 3 * 6144 * 16384, "card: 39B active"),
        ("qwen3-30b-a3b", 30_532_122_624 - 48 * 120 * 3 * 2048 * 768, "card: 3.3B activated"),
    ],
)
def test_moe_active_per_token(name: str, active: int, note: str) -> None:
    """Active parameters: dense parts + top_k of E routed experts per MoE layer."""
    _, spec = load_preset(name)
    assert summarize(spec).active_per_token == active, note


def test_deepseek_v3_active_is_37b() -> None:
    """Main model active = 671,026,419,200 − 58·248·(3·7168·2048) = 37,552,297,472 ("37B")."""
    _, spec = load_preset("deepseek-v3")
    assert summarize(spec).main_active_per_token == 37_552_297_472


@pytest.mark.parametrize(
    ("name", "non_embedding"),
    [
        ("pythia-6.9b", 6_444_163_072),  # Pythia card: non-embedding params
        ("qwen2.5-0.5b", 494_032_768 - 151936 * 896),  # card: 0.36B non-embedding
        ("qwen2.5-7b", 7_615_616_512 - 2 * 152064 * 3584),  # card: 6.53B non-embedding
    ],
)
def test_non_embedding(name: str, non_embedding: int) -> None:
    _, spec = load_preset(name)
    assert summarize(spec).non_embedding == non_embedding


def test_load_preset_errors_and_case() -> None:
    """Names are case-insensitive; the plan's default model is the preset's architecture."""
    display, spec = load_preset("Llama-3.1-8B")
    assert display == "Llama-3.1-8B" and spec == LLAMA_31_8B
    with pytest.raises(PresetError, match="unknown model preset 'nope'"):
        load_preset("nope")


def test_models_table_lists_every_preset() -> None:
    table = format_models_table()
    lines = table.splitlines()
    assert lines[0].split()[:3] == ["preset", "family", "total"]
    assert len(lines) == 1 + len(preset_names())
    assert "8,030,261,248" in table and "deepseek-v3" in table
