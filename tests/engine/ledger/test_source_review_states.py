"""Model-state rows the source review (shared reference source-review.md) proved wrong,
each re-derived by hand from the framework's code: R1 (Megatron-Core's gradient buffer)
and R2 (QLoRA's 4-bit storage under FSDP / ZeRO-3).

Llama-3.1-8B (the default plan): P = 8,030,261,248. Llama-2-70B's decoder linears: per
layer q 8192², k and v 8192·1024, o 8192², gate, up and down 8192·28672 —
2·67,108,864 + 2·8,388,608 + 3·234,881,024 = 855,638,016 weights, × 80 layers =
68,451,041,280 quantized weights.
"""

from __future__ import annotations

from typing import Any

import pytest
from ledger_plans import make_plan

from engine.estimate import estimate
from engine.exports.peft_snippet import peft_snippet
from engine.ledger.nodes.communication import step_communication
from engine.ledger.row import MOMENTS, Row
from engine.plan import Plan, with_values
from engine.presets import accelerator_changes, plan_for_model_preset
from engine.stacks.defaults import resolved

P_8B = 8_030_261_248
LAYER_QUANTIZED = 855_638_016
QUANTIZED_70B = 80 * LAYER_QUANTIZED
GIB = 2**30


def _rows(plan: Plan) -> dict[str, Row]:
    return {r.id: r for r in estimate(plan).rows}


def test_megatron_grad_buffer_is_live_from_the_ddp_wrap() -> None:
    """R1. Megatron-Core ``megatron/core/distributed/param_and_grad_buffer.py``
    ``_ParamAndGradBuffer.__init__`` allocates ``grad_data = torch.zeros(numel,
    dtype=grad_dtype)`` when ``DistributedDataParallel`` wraps the model (every
    ``param.main_grad`` is a view of it) and ``reset()`` only zeroes it, so the fp32
    buffer — 4 B × 8,030,261,248 = 32,121,044,992 B (one flat buffer, a multiple of 512)
    — is live at every moment, forward included, even at grad_accum 1. The stack
    default that chooses it: ``megatron_core`` ``--bf16`` gives fp32 main grads."""
    plan = make_plan(parallelism__strategy="megatron_distopt")
    assert resolved(plan).method.precision.grad_dtype == "fp32"
    est = estimate(plan)
    g = {r.id: r for r in est.rows}["hbm.grads"]
    assert g.low == g.high == 4 * P_8B == 32_121_044_992
    assert g.moments == frozenset(m for m, _ in MOMENTS)
    assert g.source == "megatron-grad-buffer"
    # the forward phase now holds every persistent state, the buffer included
    states = sum(r.high for r in est.rows if r.kind == "persistent" and r.allocated)
    assert est.heaviest.phases["forward"].high > states


def test_zero2_gradients_still_come_with_backward() -> None:
    """ZeRO-1/2 allocate their flat gradient partition lazily (DeepSpeed
    ``stage_1_and_2.py`` ``copy_grads_in_partition``): not live in forward at grad_accum 1
    — R1 changes Megatron's buffer only."""
    g = _rows(make_plan(parallelism__strategy="zero2"))["hbm.grads"]
    assert "forward" not in g.moments and "optimizer" in g.moments


def _peft_70b_qlora(**changes: Any) -> Plan:
    """PEFT's documented "QLoRA and DeepSpeed ZeRO-3 for finetuning 70B llama model on
    2X40GB GPUs" run (docs/source/accelerate/deepspeed.md; the shared dev case
    peft-llama2-70b-qlora-zero3-2x40gb): r 8 on all linears, seq 2048, micro-batch 2,
    grad_accum 2, gradient checkpointing, flash attention, DP 2."""
    base = {
        "model.preset": None,
        "model.architecture.vocab": 32008,
        "model.architecture.max_position": 4096,
        "stack.name": "hf_trainer",
        "method.kind": "qlora",
        "method.lora.rank": 8,
        "method.lora.alpha": 16,
        "method.lora.targets": ("q", "k", "v", "o", "gate", "up", "down"),
        "batch.seq_len": 2048,
        "batch.micro_batch": 2,
        "batch.grad_accum": 2,
        "method.recompute.policy": "full",
        "runtime.attention": "flash_attn",
        "parallelism.dp": 2,
        "parallelism.strategy": "zero3",
        **accelerator_changes("a100-sxm-40gb"),
    }
    return with_values(plan_for_model_preset("llama-3.1-70b"), {**base, **changes})


@pytest.mark.parametrize(
    ("strategy", "dp", "storage"),
    [
        ("zero3", 2, "bf16"),
        ("fsdp2", 8, "bf16"),
        ("fsdp1_full_shard", 8, "bf16"),
        ("ddp", 2, "uint8"),
    ],
)
def test_quant_storage_default_follows_the_strategy(strategy: str, dp: int, storage: str) -> None:
    """peft's multi-GPU QLoRA recipes (docs/source/accelerate/deepspeed.md, fsdp.md) set
    ``bnb_4bit_quant_storage=bfloat16`` for ZeRO-3 and FSDP; bitsandbytes' default
    (``functional.quantize_4bit``) is uint8, which a replicating strategy keeps."""
    plan = _peft_70b_qlora(**{"parallelism.strategy": strategy, "parallelism.dp": dp})
    assert resolved(plan).method.qlora.quant_storage == storage


def test_zero3_partitions_bf16_stored_nf4_and_gathers_it_packed() -> None:
    """R2. bitsandbytes ``functional.quantize_4bit`` stores a tensor of n weights as
    ``((n + 1) // (2·itemsize), 1)`` of ``quant_storage``: n/4 bf16 elements. ZeRO-3
    partitions each parameter to ceil(numel/2) on DP 2 (stage3 ``_partition_param``), so
    the rank holds 68,451,041,280 / 8 = 8,556,380,160 bf16 elements = 17,112,760,320 B
    (one flat buffer, a multiple of 512 B) instead of the whole 34,225,520,640 B.
    A gathered layer is its packed linears plus the two RMSNorm weights at the gather
    dtype (bf16): (855,638,016 / 4 + 2·8192) × 2 = 427,851,776 B — not 1,711,308,800 B
    (the linears as bf16). The quantization constants stay whole on every rank."""
    rows = _rows(_peft_70b_qlora())
    assert rows["hbm.weights.nf4"].high == QUANTIZED_70B // 8 * 2 == 17_112_760_320
    assert rows["hbm.gathered.layers"].low == (LAYER_QUANTIZED // 4 + 2 * 8192) * 2
    assert rows["hbm.gathered.layers"].low == 427_851_776
    whole = _rows(_peft_70b_qlora(**{"method.qlora.quant_storage": "uint8"}))
    assert whole["hbm.weights.nf4"].high == QUANTIZED_70B // 2 == 34_225_520_640
    assert whole["hbm.weights.nf4_constants"] == rows["hbm.weights.nf4_constants"]


def test_peft_70b_qlora_zero3_fits_two_40gb_cards() -> None:
    """The source review's corrected figure for that run: ≈ 27.1–28.6 GiB allocated
    (NF4 31.88 → 15.94 GiB, gathered units at 0.5 B per weight); PEFT reports 36.6 GB
    per GPU on the device, which the allocated peak must stay under."""
    est = estimate(_peft_70b_qlora())
    assert 27 * GIB <= est.peak.low <= est.peak.high <= 29 * GIB
    assert est.peak.high < 36.6e9


def test_fsdp2_uint8_nf4_is_ignored_and_never_gathered() -> None:
    """accelerate ``utils/fsdp_utils.py`` (FSDP2 preparation) puts uint8-stored
    ``Params4bit`` in ``ignored_params``: the rank keeps the whole packed data
    (68,451,041,280 / 2 B) and a gathered layer unit holds only its two norms,
    2·8192 / 8 rows each, gathered to 2·8192 × 2 B = 32,768 B."""
    plan = _peft_70b_qlora(
        **{
            "parallelism.strategy": "fsdp2",
            "parallelism.dp": 8,
            "method.qlora.quant_storage": "uint8",
        }
    )
    rows = _rows(plan)
    assert rows["hbm.weights.nf4"].high == QUANTIZED_70B // 2
    assert rows["hbm.gathered.layers"].high == 2 * 8192 * 2 == 32_768


def test_fsdp2_bf16_nf4_is_sharded_on_dim0() -> None:
    """FSDP2 chunks each (n/4, 1) packed parameter on dim 0 into 8: n/32 rows each, all
    n divisible by 32 here — 68,451,041,280 / 32 × 2 B = 4,278,190,080 B per rank."""
    plan = _peft_70b_qlora(**{"parallelism.strategy": "fsdp2", "parallelism.dp": 8})
    assert _rows(plan)["hbm.weights.nf4"].high == QUANTIZED_70B // 32 * 2 == 4_278_190_080


def test_peft_snippet_names_the_storage_dtype() -> None:
    """The exported BitsAndBytesConfig carries the storage dtype the ledger assumed:
    ``bnb_4bit_quant_storage=torch.bfloat16`` under ZeRO-3 (peft's recipe), nothing
    (bitsandbytes' uint8 default) under DDP."""
    sharded = peft_snippet(_peft_70b_qlora())
    assert sharded is not None and "bnb_4bit_quant_storage=torch.bfloat16" in sharded.text
    ddp = peft_snippet(_peft_70b_qlora(**{"parallelism.strategy": "ddp"}))
    assert ddp is not None and "bnb_4bit_quant_storage" not in ddp.text


def test_uint8_nf4_is_not_all_gathered() -> None:
    """The communication follows the gathered units: with bf16 storage each ZeRO-3
    all-gather moves the packed data, 68,451,041,280 / 2 = 34,225,520,640 B of it
    (the full tensor S of the collective); stored as uint8 it is never gathered, so S
    is that much smaller."""

    def gather_size(plan: Plan) -> int:
        comm = step_communication(resolved(plan))
        return next(t.size for t in comm.transfers if t.what == "parameters for forward")

    packed = gather_size(_peft_70b_qlora())
    kept = gather_size(_peft_70b_qlora(**{"method.qlora.quant_storage": "uint8"}))
    assert packed - kept == QUANTIZED_70B // 2 == 34_225_520_640
