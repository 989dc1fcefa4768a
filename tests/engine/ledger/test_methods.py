"""Methods as branches: LoRA, QLoRA and custom subsets, against hand counts."""

from __future__ import annotations

import pytest
from ledger_plans import SMOL, make_plan, rows_of

from engine.errors import PlanError
from engine.estimate import estimate
from engine.ledger.states.lora import lora_param_count
from engine.models.inventory import build_inventory
from engine.plan import default_plan


def test_lora_trainable_count_llama_31_8b_by_hand() -> None:
    """LoRA r = 16 on q, k, v, o of Llama-3.1-8B (h = 4096, KV dim 8·128 = 1024):
    per layer r·((4096+4096) + (4096+1024) + (4096+1024) + (4096+4096)) = 16 · 26,624
    = 425,984; × 32 layers = 13,631,488 trainable parameters."""
    spec = default_plan().model.architecture
    assert lora_param_count(build_inventory(spec), default_plan().method.lora) == 13_631_488


def test_lora_rows_on_a_single_gpu() -> None:
    """Llama-3.1-8B, LoRA r = 16 (q, k, v, o), pure bf16 base, fp32 adapters (PEFT
    default), one GPU (DDP, dp = 1), 512 B rounding:
    - frozen base 8,030,261,248 × 2 B = 16,060,522,496 B (every tensor a multiple of 512)
    - adapters 13,631,488 × 4 B = 54,525,952 B (A: 16 × 4096 × 4 = 262,144 B; B for
      k/v: 1024 × 16 × 4 = 65,536 B — all multiples of 512)
    - grads = adapters; AdamW moments follow the fp32 adapters: 2 × 54,525,952 B
    - step: 256 adapter tensors (32 layers × 4 targets × A, B) × 512 B = 131,072 B."""
    rows = rows_of(
        make_plan(
            method__kind="lora",
            method__precision__policy="pure_16bit",
            parallelism__strategy="ddp",
            parallelism__dp=1,
        )
    )
    assert rows["hbm.weights.frozen"] == 16_060_522_496
    assert rows["hbm.weights.adapters"] == 54_525_952
    assert rows["hbm.grads"] == 54_525_952
    assert rows["hbm.optimizer.exp_avg"] == rows["hbm.optimizer.exp_avg_sq"] == 54_525_952
    assert rows["hbm.optimizer.step"] == 256 * 512
    assert "hbm.weights" not in rows


def test_qlora_nf4_and_constants_by_hand() -> None:
    """SmolLM-135M QLoRA, block 64, double quantization, non-quantized tensors upcast
    to fp32, one GPU, no allocation rounding. Quantized: the 7 projections of 30 layers,
    per layer 576·576·2 + 192·576·2 + 1536·576·3 = 3,538,944 elements, 106,168,320 in
    all, packed two per byte → 53,084,160 B. Constants per tensor: blocks = n/64 uint8
    + ceil(blocks/256) × 4 B + 4 B offset. q/o: 5184 blocks → 5184 + 21·4 + 4 = 5272;
    k/v: 1728 → 1728 + 7·4 + 4 = 1760; gate/up/down: 13,824 → 13,824 + 54·4 + 4 =
    14,044. Per layer 2·5272 + 2·1760 + 3·14,044 = 56,196 → × 30 = 1,685,880 B.
    Frozen fp32: embedding 28,311,552 + norms 61·576 = 28,346,688 elements × 4 B."""
    rows = rows_of(
        make_plan(
            model__architecture=SMOL,
            method__kind="qlora",
            parallelism__strategy="ddp",
            parallelism__dp=1,
            runtime__allocation_granularity_bytes=1,
        )
    )
    assert rows["hbm.weights.nf4"] == 53_084_160
    assert rows["hbm.weights.nf4_constants"] == 1_685_880
    assert rows["hbm.weights.frozen"] == 28_346_688 * 4
    assert rows["hbm.weights.adapters"] == 1_843_200 * 4  # r16 on q,k,v,o: 30·16·3840


def test_qlora_without_double_quant_stores_fp32_absmax() -> None:
    """Without double quantization each block of 64 keeps an fp32 absmax: 106,168,320 /
    64 × 4 B = 6,635,520 B (every tensor's numel divides by 64)."""
    rows = rows_of(
        make_plan(
            model__architecture=SMOL,
            method__kind="qlora",
            method__qlora__double_quant=False,
            parallelism__strategy="ddp",
            parallelism__dp=1,
            runtime__allocation_granularity_bytes=1,
        )
    )
    assert rows["hbm.weights.nf4_constants"] == 6_635_520


def test_custom_subset_by_role_trains_only_those() -> None:
    """Training only the norms of Llama-3.1-8B: 65 × 4096 = 266,240 parameters. FSDP2
    over 8: each norm's 512-element shard is 2048 B fp32 (a multiple of 512), so grads
    are 266,240 / 8 × 4 = 133,120 B, and the rest of the model is frozen."""
    rows = rows_of(make_plan(method__kind="custom", method__custom__roles=["norm", "final_norm"]))
    assert rows["hbm.grads"] == 133_120
    assert rows["hbm.weights"] + rows["hbm.weights.frozen"] == 4_015_130_624


def test_custom_subset_by_count_scales_to_the_rank_share() -> None:
    """A bare count of 1,000,000 trainable params over FSDP2 × 8, on a single-stage
    rank holding 1/8 of the model: 125,000 fp32 grads = 500,000 B (one allocation)."""
    rows = rows_of(make_plan(method__kind="custom", method__custom__count=1_000_000))
    assert rows["hbm.grads"] == 500_224  # 500,000 rounded up to 512 B
    assert rows["hbm.weights.frozen"] == 4_015_130_624


def test_frozen_parameters_get_no_gradients_or_optimizer() -> None:
    est = estimate(make_plan(method__kind="lora"))
    ids = {r.id for r in est.rows}
    assert "hbm.grads" in ids
    grads = next(r for r in est.rows if r.id == "hbm.grads")
    assert grads.high < 10**8  # adapters only, not the 8B base


def test_lora_targets_that_match_nothing_are_refused() -> None:
    with pytest.raises(PlanError, match="match no tensor"):
        estimate(make_plan(method__kind="lora", method__lora__targets=["gate_up"]))
