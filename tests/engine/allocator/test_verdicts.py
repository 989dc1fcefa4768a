"""The fit test on published runs: the verdict their runs show, and what decides.

Fit = live tensors + the fragmentation a free-and-retry cannot release + memory outside
PyTorch, against the capacity less the user's headroom (default 0 %): the side-stream
caches and other wholly free segments are released before an out-of-memory
(``CUDACachingAllocator.cpp``'s free-and-retry), so they count in reserved and device
memory but not in the fit.
"""

from __future__ import annotations

from engine.estimate import estimate
from engine.plan import with_value
from engine.units import GiB
from engine.verdict import fit_parts
from tests.engine.allocator.published import (
    LLAMA2_70B_FSDP_16,
    MISTRAL_7B_LORA_24GB,
    PEFT_70B_LORA_ZERO3,
    plan_of,
)


def test_a_7b_lora_with_full_recompute_fits_one_24_gb_card() -> None:
    """Mistral-7B LoRA, bf16 base (7.24 B × 2 B = 13.5 GiB) + fp32 adapters, full
    recompute at 4,096 tokens: ~16.2 GiB allocated, fits the RTX 4090's 23.7 GiB.
    The old pessimistic model (36 % on the whole peak, 10 % headroom) said it did not."""
    plan = plan_of("mistral-7b", MISTRAL_7B_LORA_24GB)
    e = estimate(plan)
    assert e.verdict == "fits", e.verdict_reason
    assert 15 * GiB < e.peak.low <= e.peak.high < 17 * GiB
    old = with_value(
        with_value(plan, "runtime.reserve_model", "fraction"), "policy.headroom_percent", 10.0
    )
    assert estimate(old).verdict != "fits"


def test_a_70b_full_fine_tune_with_fsdp_fits_16_a100_80gb() -> None:
    """Llama-2-70B, accelerate FSDP full shard on 16 × A100 80 GB, seq 2048, batch 1,
    gradient checkpointing: the published run trained 500 steps. Allocated 71.6–73.2 GiB
    under the 79.15 GiB the card exposes; the unreleasable fragmentation (0.05–0.09 of the
    transient part) and NCCL and cuBLAS keep the fit peak under it too. FSDP1's side
    pools hold only the units in flight (plus at most one), and its construction cache is
    reused by the step's transient, so reserved stays under the capacity as well."""
    e = estimate(plan_of("llama-3.1-70b", LLAMA2_70B_FSDP_16))
    assert e.verdict == "fits", e.verdict_reason
    assert 71 * GiB < e.peak.low <= e.peak.high < 74 * GiB
    assert e.fit_peak.high <= e.limit_bytes
    assert e.heaviest.reserved_peak.high <= e.limit_bytes


def test_the_peft_70b_zero3_lora_fits_8_h100_with_about_64_gb_on_the_device() -> None:
    """PEFT docs: Llama-2-70B LoRA, ZeRO-3 on 8 × H100 80 GB, "64 GB (80%)" per GPU in
    W&B (NVML: device memory). The verdict fits, and the device figure is of that size
    (55–63 GiB predicted against 63.3–64.1 GiB measured)."""
    e = estimate(plan_of("llama-3.1-70b", PEFT_70B_LORA_ZERO3))
    assert e.verdict == "fits", e.verdict_reason
    dev = e.heaviest.device_peak
    assert 50 * GiB < dev.low <= dev.high < 66 * GiB


def test_the_verdict_names_what_decides() -> None:
    """On a 16 GB card the same 7B LoRA's live tensors alone (≥ 16.1 GiB) pass the
    14.9 GiB it exposes: "live tensors" decide. With the headroom raised until only the
    fragmentation is left over, the verdict says so."""
    plan = plan_of("mistral-7b", MISTRAL_7B_LORA_24GB)
    small = with_value(plan, "hardware.accelerator", "custom")
    small = with_value(small, "hardware.usable_policy", "custom")
    small = with_value(small, "hardware.usable_hbm_bytes", 16 * GiB)
    e = estimate(small)
    assert e.verdict == "does_not_fit" and e.decided_by == "live tensors", e.verdict_reason
    # a limit between live + outside and the whole fit peak: fragmentation decides
    custom = with_value(plan, "hardware.usable_policy", "custom")
    f = estimate(custom)
    parts = fit_parts(f.heaviest.totals)
    floor = max(f.fit_peak.low, parts.live[1] + parts.outside[1])
    limit = floor + (f.fit_peak.high - floor) // 2
    e2 = estimate(with_value(custom, "hardware.usable_hbm_bytes", limit))
    assert e2.verdict == "straddles" and e2.decided_by == "fragmentation", e2.verdict_reason
