"""LitGPT's fused qkv LoRA adapter (``method.lora.implementation = litgpt``).

LitGPT's ``CausalSelfAttention`` has one fused ``attn`` linear (litgpt/model.py), which
``LoRAQKVLinear`` (litgpt/lora.py, 2024) adapts with its q / k / v ``enable_lora``
flags: one ``lora_dropout`` on the input, ``lora_A`` of r rows per enabled part, and
``zero_pad``'s out-of-place ``index_copy`` whose source (tokens × the enabled parts'
widths) autograd keeps (torch tools/autograd/derivatives.yaml ``index_copy``:
``expand_as(source)``), with its int64 index. Plans below: SmolLM's shapes (hidden 576,
9 heads of 64, 30 layers), bf16 adapters, dropout 0.05, r 16, targets q and v, one
sequence of 1,024 tokens; every tensor below is a multiple of 512 B (no rounding).
"""

from __future__ import annotations

from typing import Any

from ledger_plans import SMOL, make_plan

from engine.estimate import estimate
from engine.ledger.states.lora import is_target, litgpt_parts
from engine.models.tensor import Tensor
from engine.sections.method import LoraSection
from engine.stacks.defaults import resolved

SAVED = "hbm.activations.saved.layers"
ADAPTERS = "hbm.weights.adapters"


def _plan(implementation: str, **changes: Any) -> Any:
    base: dict[str, Any] = {
        "model__architecture": SMOL,
        "method__kind": "lora",
        "method__lora__rank": 16,
        "method__lora__targets": ["q", "v"],
        "method__lora__dropout": 0.05,
        "method__lora__adapter_dtype": "bf16",
        "method__lora__implementation": implementation,
        "method__precision__policy": "pure_16bit",
        "parallelism__strategy": "ddp",
        "parallelism__dp": 1,
        "batch__seq_len": 1024,
        "batch__micro_batch": 1,
        "method__recompute__policy": "none",
        "runtime__activation_band": {"low": 1.0, "high": 1.0},
    }
    return make_plan(**{**base, **changes})


def _rows(plan: Any) -> dict[str, Any]:
    return {r.id: r for r in estimate(plan).rows}


def test_litgpt_runs_the_fused_model_and_adapts_its_qkv() -> None:
    """The LitGPT adapter implies LitGPT's model (one fused qkv per layer); its q / v
    targets are parts of the adapter on that tensor. peft keeps the literal targets."""
    lit = _plan("litgpt")
    assert resolved(lit).model.architecture.fused_qkv
    assert not resolved(_plan("peft")).model.architecture.fused_qkv
    lora = LoraSection(targets=("q", "v"), implementation="litgpt")
    assert litgpt_parts(lora) == frozenset({"q", "v"})
    assert litgpt_parts(LoraSection(targets=("q", "v"))) == frozenset()
    qkv = Tensor("model.layers.0.self_attn.qkv_proj.weight", (960, 576), "qkv", layer=0)
    assert is_target(qkv, lora)
    assert not is_target(qkv, LoraSection(targets=("q", "v")))


def test_adapter_parameters_have_an_a_of_r_per_enabled_part() -> None:
    """lora_A is (2 · 16) × 576; B is given the fused linear's rows, 576 + 2 · 192 = 960
    (LitGPT's has 576 + 192: the k rows, 192 · 16, are the documented over-count):
    16 · (2 · 576 + 960) = 33,792 per layer, × 30 layers × 2 B = 2,027,520 B.
    peft's q and v adapters: 16 · (576 + 576) + 16 · (576 + 192) = 30,720 per layer."""
    assert _rows(_plan("litgpt"))[ADAPTERS].high == 33_792 * 30 * 2 == 2_027_520
    assert _rows(_plan("peft"))[ADAPTERS].high == 30_720 * 30 * 2


def test_grouped_heads_one_dropout_and_the_zero_pad_source() -> None:
    """SmolLM's 3 K/V heads, copied to every head (runtime.kv_expanded, as LitGPT's
    forward does): SDPA keeps the same q, k, v either way. Per token and layer peft
    keeps, for each of q and v, the dropout output 576 · 2 B, its mask 576 · 1 B and A's
    output 16 · 2 B: 2 · 1,760 = 3,520 B. LitGPT keeps one dropout output and mask
    (1,728 B), A's output 32 · 2 = 64 B and the index_copy source (576 + 192) · 2 =
    1,536 B: 3,328 B, 192 B less; plus the int64 index, 768 · 8 = 6,144 B a layer.
    30 layers × (−192 · 1,024 + 6,144) = −5,713,920 B."""
    lit = _rows(_plan("litgpt", runtime__kv_expanded=True))[SAVED]
    peft = _rows(_plan("peft", runtime__kv_expanded=True))[SAVED]
    assert lit.high - peft.high == lit.low - peft.low == 30 * (-192 * 1024 + 6144)
    assert lit.high - peft.high == -5_713_920


def test_equal_heads_keep_the_whole_fused_output_for_v() -> None:
    """9 K/V heads (multi-head, like Llama-2-7B): LitGPT's v is a reshape view of the
    fused qkv output, which flash keeps whole: (576 + 2 · 576) · 2 = 3,456 B instead of
    v's own 1,152 (+2,304 B). The adapter: one dropout output and mask (1,728 B), A's
    output 64 B, the index_copy source (576 + 576) · 2 = 2,304 B, against peft's two
    adapters 3,520 B: +576 B. 30 × ((2,304 + 576) · 1,024 + 1,152 · 8) = 88,750,080 B."""
    mha = {**SMOL, "kv_heads": 9}
    lit = _rows(_plan("litgpt", model__architecture=mha))[SAVED]
    peft = _rows(_plan("peft", model__architecture=mha))[SAVED]
    assert lit.high - peft.high == 30 * ((2304 + 576) * 1024 + 1152 * 8) == 88_750_080


def test_all_three_parts_enabled_scatter_nothing() -> None:
    """enable_lora all true: zero_pad returns its input (no index_copy), so the LitGPT
    adapter differs from peft's three only by running one dropout: two fewer dropout
    outputs and masks (2 · 1,728 B) and A's output 48 · 2 B against 3 · 16 · 2 B (equal).
    Grouped heads copied (kv_expanded): SDPA keeps the same tensors.
    30 × −3,456 · 1,024 = −106,168,320 B."""
    three = {"method__lora__targets": ["q", "k", "v"], "runtime__kv_expanded": True}
    lit = _rows(_plan("litgpt", **three))[SAVED]
    peft = _rows(_plan("peft", **three))[SAVED]
    assert lit.high - peft.high == 30 * -3456 * 1024 == -106_168_320
