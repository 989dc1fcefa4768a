"""What fits, diagnostics and sensitivity, with formula estimators derived by hand."""

from __future__ import annotations

from engine.estimate import estimate
from engine.plan import Plan, default_plan, with_values
from engine.units import GB
from engine.whatif.diagnostics import MIN_SAVING_BYTES, diagnose
from engine.whatif.fit import largest_micro_batch, longest_sequence
from engine.whatif.sensitivity import sensitivity
from tests.engine.layout.layout_fakes import fake_estimator


def _cap100() -> Plan:
    return with_values(
        default_plan(), {"hardware.usable_hbm_bytes": 100, "policy.headroom_percent": 0.0}
    )


def test_largest_micro_batch() -> None:
    """Peak = 7 B per sequence: 7·14 = 98 ≤ 100 < 105 = 7·15 → micro-batch 14."""
    r = largest_micro_batch(_cap100(), estimator=fake_estimator(lambda p: 7 * p.batch.micro_batch))
    assert r.value == 14 and not r.bounded


def test_largest_micro_batch_with_global_batch_held() -> None:
    """Global batch 96 held over 8 replicas = 12 per replica: micro-batches must divide
    12 (1, 2, 3, 4, 6, 12); 7 B each → 12·7 = 84 fits, so 12 (accumulation 1)."""
    plan = with_values(
        _cap100(),
        {"batch.hold_fixed": "global_batch", "batch.global_batch": 96, "batch.grad_accum": 12},
    )
    r = largest_micro_batch(plan, estimator=fake_estimator(lambda p: 7 * p.batch.micro_batch))
    assert r.value == 12
    r = largest_micro_batch(plan, estimator=fake_estimator(lambda p: 20 * p.batch.micro_batch))
    assert r.value == 4  # 20·4 = 80 fits, 20·6 = 120 does not; 5 does not divide 12


def test_longest_sequence() -> None:
    """Peak = seq/100 B: fits up to 10,000 tokens; multiples of 128: 78·128 = 9,984."""
    r = longest_sequence(_cap100(), estimator=fake_estimator(lambda p: p.batch.seq_len // 100))
    assert r.value == 9_984


def test_unbounded_when_ledger_does_not_grow() -> None:
    """A ledger that does not grow with the micro-batch (a constant estimator): every
    micro-batch up to the bound fits, and the result says it hit the bound rather than
    a limit."""
    r = largest_micro_batch(_cap100(), bound=64, estimator=fake_estimator(lambda p: 50))
    assert r.value == 64 and r.bounded and "search bound" in r.reason


def test_largest_micro_batch_of_the_real_ledger() -> None:
    """The default plan's activations grow with the micro-batch: the answer b fits and
    b + 1 does not (checked with estimate() directly)."""
    r = largest_micro_batch(default_plan(), bound=64)
    assert not r.bounded and r.value >= 1

    def fits(b: int) -> bool:
        e = estimate(with_values(default_plan(), {"batch.micro_batch": b}))
        return e.heaviest.fit_peak.high <= e.limit_bytes

    assert fits(r.value) and not fits(r.value + 1)


def test_diagnose_default_plan() -> None:
    """FSDP2 on 8 ranks, s = 4096: saved activations (≈27.6 GB) dominate; the model-state
    rows are 4,015,130,624 B each (fp32 weights, grads, exp_avg, exp_avg_sq) and those
    that make the top rows share the peak equally; dominant rows come largest first.
    Full recompute saves more than anything but QLoRA, whose stack default checkpoints
    every layer as well (peft prepare_model_for_kbit_training). LoRA (r16 on q, k, v, o)
    runs on the HF Trainer + peft stack: its frozen base stays in the bf16 it was loaded
    in (a 2.01 GB shard instead of 4.02 GB), its grads and fused AdamW state cover only
    13,631,488 adapter params and it has no foreach temporaries, so it saves less than
    the 2.01 GB + the three other 4.02 GB rows + the 4.02 GB foreach copy (its adapters
    save fp32 copies of their inputs for backward)."""
    d = diagnose(default_plan())
    sizes = [x.row.high for x in d.dominant]
    assert sizes == sorted(sizes, reverse=True)
    assert d.dominant[0].row.id == "hbm.activations.saved.layers"
    states = {x.row.id: x for x in d.dominant if x.row.high == 4_015_130_624}
    assert set(states) >= {"hbm.weights", "hbm.grads"}
    shares = {round(x.share, 6) for x in states.values()}
    assert len(shares) == 1
    top = [s.changes for s in d.suggestions[:2]]
    assert top == [{"method.kind": "qlora"}, {"method.recompute.policy": "full"}]

    lora = [s for s in d.suggestions if s.changes == {"method.kind": "lora"}]
    assert lora and lora[0].saves is not None
    base = estimate(default_plan()).fit_peak.high
    with_lora = estimate(with_values(default_plan(), {"method.kind": "lora"})).fit_peak.high
    assert lora[0].saves == base - with_lora
    assert 0 < lora[0].saves < 2_007_565_312 + 4 * 4_015_130_624


def test_diagnose_savings_are_re_estimated() -> None:
    """Peak 1000 GB under FSDP2, 600 under ZeRO-2, 400 under ZeRO-3, else 1000: the
    suggestions list ZeRO-3 (saves 600 GB) before ZeRO-2 (saves 400 GB) and nothing
    else."""
    table = {"zero2": 600 * GB, "zero3": 400 * GB}
    est = fake_estimator(lambda p: table.get(p.parallelism.strategy, 1000 * GB))
    d = diagnose(_cap100(), estimator=est)
    assert [(s.label, s.saves) for s in d.suggestions] == [
        ("use ZeRO-3", 600 * GB),
        ("ZeRO-3 with parameters offloaded to CPU", 600 * GB),
        ("use ZeRO-2", 400 * GB),
    ]


def test_diagnose_offers_no_saving_too_small_to_show() -> None:
    """ZeRO-2 saves 9,999,999 B (0.0099… GB: "saves 0.00 GB" on screen), ZeRO-3
    10,000,000 B (0.01 GB, the finest figure printed): only ZeRO-3 (and its variants) is
    offered; ZeRO-2 is listed as not applicable with the reason."""
    base = 1000 * GB
    table = {"zero2": base - (MIN_SAVING_BYTES - 1), "zero3": base - MIN_SAVING_BYTES}
    est = fake_estimator(lambda p: table.get(p.parallelism.strategy, base))
    d = diagnose(_cap100(), estimator=est)
    assert MIN_SAVING_BYTES == 10_000_000
    assert "use ZeRO-2" not in [s.label for s in d.suggestions]
    assert all(s.saves is not None and s.saves >= MIN_SAVING_BYTES for s in d.suggestions)
    skipped = next(s for s in d.not_applicable if s.label == "use ZeRO-2")
    assert "saves only 9,999,999 B" in (skipped.error or "")


def test_sensitivity_tornado() -> None:
    """Peak = 10·seq: sequence ½× to 2× (2,048 → 8,192) swings 20,480 → 81,920; the
    other inputs do not move this peak, so their bars have zero width."""
    bars = sensitivity(default_plan(), estimator=fake_estimator(lambda p: 10 * p.batch.seq_len))
    assert bars[0].input == "batch.seq_len"
    assert (bars[0].peak_at_low, bars[0].peak_at_high) == (20_480, 81_920)
    assert all(b.swing == 0 for b in bars[1:]) and len(bars) == 5
