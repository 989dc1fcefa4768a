"""The workload inputs: packing, tokens per step, torch.compile; the acceptance inputs;
marketed HBM read in binary units. Every default keeps the figures as they were."""

from __future__ import annotations

import json
from importlib import resources

import pytest
from hypothesis import given
from hypothesis import strategies as st

from engine import presets as hardware_presets
from engine.estimate import estimate
from engine.plan import default_plan, with_values
from engine.sections.hardware import HardwareSection
from engine.sources import all_sources
from engine.units import GiB
from engine.workload import compile_note, step_tokens

SAVED = "hbm.activations.saved.layers"


def _row(plan: object, row_id: str) -> object:
    est = estimate(plan)  # type: ignore[arg-type]
    return next(r for r in est.rows if r.id == row_id)


def test_defaults_change_no_row() -> None:
    """Padded, samples filling the sequence, eager: the rows of a plan that states the
    defaults are the default plan's, byte for byte."""
    base = estimate(default_plan())
    stated = estimate(
        with_values(
            default_plan(),
            {
                "workload.packing": "padded",
                "workload.mean_sample_tokens": None,
                "workload.torch_compile": False,
            },
        )
    )
    assert [(r.id, r.low, r.high) for r in base.rows] == [
        (r.id, r.low, r.high) for r in stated.rows
    ]


def test_packing_scales_the_low_end_by_the_real_token_share() -> None:
    """Llama-3.1-8B, seq 4096, micro-batch 1, FSDP2 over 8, no recompute: the 32 layers
    save 26,324,500,480 B per micro-batch (the row's formula, before the activation band
    0.98–1.05), so padded: low = int(26,324,500,480 × 0.98) = 25,798,010,470 and high =
    int(26,324,500,480 × 1.05) = 27,640,725,504. Packed without padding with samples of
    1,024 tokens on average (transformers DataCollatorWithFlattening): a typical
    micro-batch holds 1,024 of the 4,096 positions, share 0.25, so low =
    int(26,324,500,480 × 0.98 × 0.25) = 6,449,502,617; the high end stays, since one
    micro-batch of the longest samples fills the sequence."""
    padded = _row(default_plan(), SAVED)
    assert (padded.low, padded.high) == (25_798_010_470, 27_640_725_504)  # type: ignore[attr-defined]
    packed_plan = with_values(
        default_plan(), {"workload.packing": "packed", "workload.mean_sample_tokens": 1024}
    )
    packed = _row(packed_plan, SAVED)
    assert (packed.low, packed.high) == (6_449_502_617, 27_640_725_504)  # type: ignore[attr-defined]
    assert "1,024/4,096 = 0.2500" in packed.formula  # type: ignore[attr-defined]
    assert "hf-padding-free" in packed.formula and "hf-padding-free" in all_sources()  # type: ignore[attr-defined]


def test_padded_samples_shorter_than_the_sequence_keep_the_activations() -> None:
    """Padding is computed and saved like real tokens: a shorter mean sample keeps every
    token's activations — and, being real padding, adds what the mask costs (issue 35
    item 7, R9: transformers ``use_gqa_in_sdpa`` refuses ``enable_gqa`` with a mask, so
    ``repeat_kv`` copies K and V to the 32 heads and the memory-efficient kernel keeps
    the mask): per layer 4,096 · (2 · 3,072 · 2 + 4,096 · 2) = 83,886,080 B, 32 layers,
    × the band's 0.98–1.05."""
    short = _row(with_values(default_plan(), {"workload.mean_sample_tokens": 512}), SAVED)
    n = 26_324_500_480 + 32 * 83_886_080
    assert (short.low, short.high) == (int(n * 0.98), int(n * 1.05))  # type: ignore[attr-defined]


@given(mean=st.integers(min_value=1, max_value=20_000))
def test_packing_never_raises_a_row_nor_moves_a_high_end(mean: int) -> None:
    plan = with_values(
        default_plan(), {"workload.packing": "packed", "workload.mean_sample_tokens": mean}
    )
    base = {r.id: r for r in estimate(default_plan()).rows}
    for r in estimate(plan).rows:
        assert r.low <= base[r.id].low and r.high == base[r.id].high


def test_tokens_per_step() -> None:
    """Micro-batch 2 × accumulation 4 × DP 8 = 64 samples a step at seq 4096. Padded
    samples of 1,000 tokens: 64 × 4,096 = 262,144 positions, 64,000 real tokens
    (1 − 64,000 / 262,144 = 75.6 % padding). Packed: the positions are the real tokens."""
    sets = {"batch.micro_batch": 2, "batch.grad_accum": 4, "workload.mean_sample_tokens": 1000}
    padded = step_tokens(with_values(default_plan(), sets))
    assert (padded.samples, padded.positions, padded.real) == (64, 262_144, 64_000)
    assert padded.padding_share == pytest.approx(1 - 64_000 / 262_144)
    packed = step_tokens(with_values(default_plan(), {**sets, "workload.packing": "packed"}))
    assert (packed.positions, packed.real, packed.padding_share) == (64_000, 64_000, 0.0)
    assert step_tokens(default_plan()).padding_share == 0.0


def test_torch_compile_has_a_note_and_keeps_the_eager_high_end() -> None:
    """Compile lowers only low ends (engine/ledger/activations/compiled.py): every row's
    high end is the eager one, and the note names the source."""
    compiled = with_values(default_plan(), {"workload.torch_compile": True})
    assert compile_note(default_plan()) is None
    note = compile_note(compiled) or ""
    assert "min-cut" in note and "torch-compile-partitioner" in all_sources()
    assert [r.high for r in estimate(compiled).rows] == [
        r.high for r in estimate(default_plan()).rows
    ]


def test_acceptance_thresholds_default_to_the_strict_reading() -> None:
    a = default_plan().acceptance
    assert (a.peak_tolerance_percent, a.warmup_steps, a.measured_steps) == (0.0, 2, 3)
    assert (a.steady_window_steps, a.max_peak_growth_percent) == (6, 0.0)


def test_marketed_hbm_is_binary_and_never_below_the_usable_capacity() -> None:
    """A marketed "80 GB" of HBM is 80 GiB (an H100 80 GB shows 79.65 GiB in nvidia-smi,
    more than 80 × 10^9 B = 74.5 GiB): hbm_bytes = 80 × 2^30 = 85,899,345,920 B, above
    the 84,932,558,848 B PyTorch can allocate. Every preset keeps usable ≤ marketed."""
    hw = HardwareSection()
    assert hw.hbm_bytes == 80 * GiB == 85_899_345_920
    assert hw.usable_hbm_bytes <= hw.hbm_bytes
    for acc in hardware_presets.accelerators():
        assert acc.usable_hbm_bytes <= acc.hbm_bytes, acc.key
        assert acc.hbm_bytes % GiB == 0, acc.key
    doc = json.loads(
        resources.files("resources").joinpath("hardware/accelerators.json").read_text("utf-8")
    )
    assert "binary" in doc["notes"]
