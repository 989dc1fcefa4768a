"""torchao's NF4 (``method.qlora.nf4_impl = torchao``, torchtune's QLoRA) against
bitsandbytes: the constants each NF4Tensor keeps and the weight ``linear_nf4``
dequantizes (torchao/dtypes/nf4tensor.py ``NF4Tensor.from_tensor``,
``double_quantize_scalers``, ``get_original_weight``, ``LinearNF4``).

Llama-3.1-8B, every q/k/v/o/gate/up/down quantized (224 tensors, 32 layers), bf16,
512-B allocator rounding. Per layer: q and o 4096 × 4096 = 16,777,216 (262,144 blocks of
64, 1,024 factors), k and v 1024 × 4096 = 4,194,304 (65,536 blocks, 256 factors), gate,
up and down 14,336 × 4096 = 58,720,256 (917,504 blocks, 3,584 factors).
"""

from __future__ import annotations

from typing import Any

from engine.estimate import estimate
from engine.plan import default_plan, with_values
from engine.presets import accelerator_changes, plan_for_model_preset

QLORA_8B: dict[str, Any] = {
    "method.kind": "qlora",
    "method.lora.rank": 8,
    "method.lora.alpha": 16,
    "method.lora.targets": ["q", "k", "v", "o", "gate", "up", "down"],
    "method.lora.adapter_dtype": "bf16",
    "method.precision.policy": "pure_16bit",
    "method.qlora.upcast_non_quantized": False,
    "method.recompute.policy": "full",
    "stack.name": "pytorch",
    "parallelism.strategy": "ddp",
    "parallelism.dp": 1,
    "batch.seq_len": 2048,
    "batch.micro_batch": 2,
    **accelerator_changes("rtx-4090-24gb"),
}


def _rows(**extra: Any) -> dict[str, Any]:
    plan = with_values(plan_for_model_preset("llama-3.1-8b"), {**QLORA_8B, **extra})
    return {r.id: r for r in estimate(plan).rows}


def test_torchao_constants_are_int8_scalers_bf16_factors_mean_and_table() -> None:
    """Per tensor, each allocation rounded up to 512 B: int8 scalers (one per block of
    64), bf16 factors (one per 256 scalers), a bf16 mean (512) and the 16-entry bf16
    table (512).
    q, o: 262,144 + 2,048 + 512 + 512 = 265,216; k, v: 65,536 + 512 + 512 + 512 = 67,072;
    gate, up, down: 917,504 + 7,168 + 512 + 512 = 925,696.
    32 × (2 × 265,216 + 2 × 67,072 + 3 × 925,696) = 32 × 3,441,664 = 110,133,248 B.
    bitsandbytes (uint8 absmax, fp32 second-level absmax, 4-B offset): q, o 262,144 +
    4,096 + 512; k, v 65,536 + 1,024 + 512; MLP 917,504 + 14,336 + 512 →
    32 × 3,464,704 = 110,870,528 B."""
    assert _rows(**{"method.qlora.nf4_impl": "torchao"})["hbm.weights.nf4_constants"].low == (
        110_133_248
    )
    assert _rows()["hbm.weights.nf4_constants"].low == 110_870_528


def test_torchao_packed_data_is_the_same_half_byte_per_weight() -> None:
    """uint8, two weights per byte, whichever library: 6,979,321,856 / 2 = 3,489,660,928 B
    (every tensor a multiple of 512)."""
    ao = _rows(**{"method.qlora.nf4_impl": "torchao"})["hbm.weights.nf4"]
    assert ao.low == _rows()["hbm.weights.nf4"].low == 3_489_660_928
    assert ao.source == "torchao-nf4"


def test_compiled_linear_nf4_dequantizes_one_fused_bf16_copy() -> None:
    """torchtune compiles each decoder layer: get_original_weight's pointwise ops fuse,
    leaving the bf16 weight the matmul reads: 58,720,256 × 2 = 117,440,512 B."""
    row = _rows(**{"method.qlora.nf4_impl": "torchao", "workload.torch_compile": True})[
        "hbm.dequantized.nf4"
    ]
    assert (row.low, row.high) == (117_440_512, 117_440_512)


def test_eager_linear_nf4_holds_int64_indices_until_the_stack() -> None:
    """Eager get_original_weight keeps its locals until it returns; at the stack: two
    int64 index halves 2 × 29,360,128 × 8 = 469,762,048, two lookups and two scaled
    halves 4 × 29,360,128 × 2 = 234,881,024, the stacked weight 117,440,512 →
    822,083,584 B (14 B per weight)."""
    row = _rows(**{"method.qlora.nf4_impl": "torchao"})["hbm.dequantized.nf4"]
    assert (row.low, row.high) == (822_083_584, 822_083_584)


def test_bitsandbytes_dequantize_band_is_unchanged() -> None:
    """bitsandbytes (the default, every non-torchtune stack): dequantize_4bit in the
    dtype it was quantized from, 2 B, up to fp32 4 B plus the 2-B cast:
    117,440,512–352,321,536 B, compiled or not."""
    for compiled in (False, True):
        row = _rows(**{"workload.torch_compile": compiled})["hbm.dequantized.nf4"]
        assert (row.low, row.high) == (117_440_512, 352_321_536)


def test_fsdp2_shards_torchao_scalers_and_factors_not_mean_or_table() -> None:
    """FSDP2 over 8 ranks: NF4Tensor.fsdp_pre_all_gather all-gathers the data, scalers and
    factors, so each splits by 8; the mean and table stay whole (512 each).
    q, o: 32,768 + 512 (128 × 2) + 512 + 512 = 34,304; k, v: 8,192 + 512 (32 × 2) + 512 +
    512 = 9,728; MLP: 114,688 + 1,024 (448 × 2 = 896) + 512 + 512 = 116,736.
    32 × (2 × 34,304 + 2 × 9,728 + 3 × 116,736) = 32 × 438,272 = 14,024,704 B."""
    rows = _rows(
        **{
            "method.qlora.nf4_impl": "torchao",
            "parallelism.strategy": "fsdp2",
            "parallelism.dp": 8,
            "stack.name": "pytorch",
        }
    )
    assert rows["hbm.weights.nf4_constants"].low == 14_024_704


def test_default_is_bitsandbytes() -> None:
    assert default_plan().method.qlora.nf4_impl == "bitsandbytes"


def test_bitsandbytes_plans_keep_their_config_hash() -> None:
    """The field is left out of the canonical form at bitsandbytes (every plan saved
    before it existed meant bitsandbytes), and is hashed once set to torchao."""
    plan = default_plan()
    assert "nf4_impl" not in plan.canonical_tree()["method"]["qlora"]
    assert "nf4_impl" in plan.model_dump(mode="json")["method"]["qlora"]  # files keep it
    ao = with_values(plan, {"method.qlora.nf4_impl": "torchao"})
    assert ao.canonical_tree()["method"]["qlora"]["nf4_impl"] == "torchao"
    assert ao.config_hash() != plan.config_hash()


def test_torchao_linear_keeps_no_input_whatever_the_bitsandbytes_version() -> None:
    """torchao's LinearNF4.forward saves only the NF4 weight (ctx.save_for_backward(weight)),
    so an old bitsandbytes (< 0.43.2, whose MatMul4Bit kept its input) changes nothing
    under torchao, while under bitsandbytes it adds the kept inputs (no AC, so each layer's
    saved set is counted whole; LoRA on q and v only, so the MLP's inputs are kept by the
    old bitsandbytes alone)."""
    no_ac = {"method.recompute.policy": "none", "method.lora.targets": ["q", "v"]}

    def saved(impl: str, version: str) -> int:
        extra = {**no_ac, "method.qlora.nf4_impl": impl, "runtime.bitsandbytes_version": version}
        return int(_rows(**extra)["hbm.activations.saved.layers"].high)

    assert saved("torchao", "0.41.0") == saved("torchao", "0.45.0")
    assert saved("bitsandbytes", "0.41.0") > saved("bitsandbytes", "0.45.0")


def test_bitsandbytes_fields_grey_under_torchao() -> None:
    """engine/stacks/applicability.py: double_quant, quant_storage and the bitsandbytes
    version are bitsandbytes settings."""
    from engine.stacks.applicability import inapplicable

    plan = with_values(plan_for_model_preset("llama-3.1-8b"), QLORA_8B)
    fields = ("method.qlora.double_quant", "method.qlora.quant_storage")
    bnb = inapplicable(plan)
    assert not any(f in bnb for f in (*fields, "runtime.bitsandbytes_version"))
    ao = inapplicable(with_values(plan, {"method.qlora.nf4_impl": "torchao"}))
    assert all(f in ao for f in (*fields, "runtime.bitsandbytes_version"))
