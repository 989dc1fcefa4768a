"""The CI slice of the Megatron-Core trace: Megatron-Core's own code against the ledger.

Llama-3.1-8B-shaped layers (hidden 4096, 32 heads, 8 KV heads, FFN 14336, vocabulary
128256 — the preset's, cut to 2 or 4 layers), s 2048, micro-batch 1, bf16 with fp32
main grads and the distributed optimizer (``megatron_distopt``) over a fake world of 8:
TP 1 × DP 8, and TP 2 × DP 4 with and without sequence parallelism. The trace runs Megatron-Core
0.16.1's GPTModel, DistributedDataParallel and ``get_megatron_optimizer``
(``engine/trace/megatron``). Per case:

- the persistent model states equal the ledger's exact rows byte for byte: bf16
  parameters (the DDP param buffer: 2 B × N ÷ TP, one buffer, no padding at these
  sizes), the fp32 grad buffer (4 B × N ÷ TP: ``_ParamAndGradBuffer`` with
  ``grad_reduce_in_fp32``), and the optimizer state — the distributed optimizer's fp32
  main shard plus Adam's two fp32 moments over it (3 × 4 B × N ÷ TP ÷ DP) plus one
  512-B fused-AdamW step counter (one main shard tensor per rank);
- the traced peak lies inside the ledger's range;
- one decoder layer's saved activations per token (traced as the 4-layer minus the
  2-layer saved set, ÷ 2 layers ÷ 2048 tokens) lie inside the range the ledger's
  ``megatron`` profile gives (its saved-layers row ÷ layers ÷ tokens).

Skipped when megatron-core (the ``trace`` extra) is not installed; CI installs it.
"""

from __future__ import annotations

import functools
from typing import Any

import pytest

from engine.estimate import Estimate, estimate
from engine.models.presets import load_preset
from engine.plan import Plan, with_values
from engine.trace.compare import unseen
from engine.trace.megatron.support import megatron_refusal
from engine.trace.result import TraceResult
from tests.trace.needs_extra import needs_trace_extra

SEQ = 2048


def _plan(layers: int, tp: int = 1, **extra: Any) -> Plan:
    _, arch = load_preset("llama-3.1-8b")
    arch = arch.model_copy(update={"layers": layers, "max_position": SEQ})
    changes: dict[str, Any] = {
        "model.name": f"llama-3.1-8b × {layers} layers",
        "model.preset": None,
        "model.architecture": arch.model_dump(mode="json"),
        "stack.name": "megatron_core",
        "parallelism.strategy": "megatron_distopt",
        "parallelism.tp": tp,
        "parallelism.dp": 8 // tp,
        "parallelism.sequence_parallel": False,
        "batch.seq_len": SEQ,
        "batch.micro_batch": 1,
        **extra,
    }
    return with_values(Plan(), changes)


@functools.cache
def _measured(
    layers: int, tp: int, sp: bool = False, recompute: str = "none"
) -> tuple[TraceResult, Estimate]:
    """Each case traced once (about 5 s each on fake tensors)."""
    from engine.trace.runner import TraceOptions, trace_plan

    changes = {"parallelism.sequence_parallel": sp, "method.recompute.policy": recompute}
    plan = _plan(layers, tp, **changes)
    return trace_plan(plan, TraceOptions(steps=2)), estimate(plan)


def _ledger_states(est: Estimate) -> dict[str, int]:
    out = {"params": 0, "grads": 0, "optimizer_state": 0}
    key = {"weights": "params", "gradients": "grads", "optimizer": "optimizer_state"}
    for r in est.rows:
        if r.location == "hbm" and r.kind == "persistent" and r.group in key:
            assert r.low == r.high, r.id
            out[key[r.group]] += r.low
    return out


CASES = [(2, 1, False), (2, 2, False), (2, 2, True)]
IDS = ["L2-tp1-dp8", "L2-tp2-dp4", "L2-tp2sp-dp4"]


@needs_trace_extra
@pytest.mark.parametrize(("layers", "tp", "sp"), CASES, ids=IDS)
def test_model_states_equal_the_ledger(layers: int, tp: int, sp: bool) -> None:
    pytest.importorskip("megatron.core")
    result, est = _measured(layers, tp, sp)
    traced = {k: result.model_states[k] for k in ("params", "grads", "optimizer_state")}
    # 2 layers: 2 × 218,112,000 (q 4096², k/v 4096·1024 each, o 4096², 3 × 4096·14336,
    # 2 norms) + 2 × 525,336,576 (embedding, head: 128,256 × 4096) + 4096 (final norm)
    n = 1_486_901_248
    norms = 5 * 4096  # RMSNorm weights are replicated over TP, everything else is split
    per_rank = (n - norms) // tp + norms
    main = 4 * per_rank // (8 // tp)  # the distributed optimizer's fp32 shard: 1/DP of it
    expected = {"params": 2 * per_rank, "grads": 4 * per_rank, "optimizer_state": 3 * main + 512}
    assert traced == expected
    assert traced == _ledger_states(est)


PEAK_CASES = [
    # traced 13,396,327,936 B: inside since the ledger's Megatron loss backward counts the
    # head's input gradient, bf16 s × h = 2048 × 4096 × 2 = 16,777,216 B, beside the
    # logits gradient's 16-bit cast (traced "temporaries" at the output layer's dgrad mm:
    # 1,592,786,944 = 1,576,009,728 + 16,777,216); it was 240,845 B above the high end
    pytest.param(2, 1, False, id=IDS[0]),
    # traced 7,908,392,448: inside, mid error −0.05 % (TP 2 halves the logits, so the
    # head's 16 MiB input gradient fits in the ledger's range)
    pytest.param(2, 2, False, id=IDS[1]),
    # traced 7,849,651,712 B, 11,132,519 B (0.14 %) above the high end (27,934,311 B
    # before the ledger counted the head's input gradient): Megatron's GlobalMemoryBuffer
    # ("mpu", megatron/core/utils.py GlobalMemoryBuffer.get_tensor) that the *local*
    # linears' sequence-parallel all-gather keeps between steps, s × h bf16 = 16,777,216 B
    # (tensor_parallel/layers.py LinearWithGradAccumulationAndAsyncCommunication.forward /
    # backward). The trace runs the local spec; the megatron profile prices the default
    # Transformer Engine spec, whose linears all-gather into per-call buffers freed after
    # use, so the ledger has no row for it (docs/trace-frameworks.md).
    pytest.param(
        2,
        2,
        True,
        marks=pytest.mark.xfail(
            strict=True, reason="local spec: the SP all-gather's GlobalMemoryBuffer (TE spec: none)"
        ),
        id=IDS[2],
    ),
]


@needs_trace_extra
@pytest.mark.parametrize(("layers", "tp", "sp"), PEAK_CASES)
def test_traced_peak_lies_inside_the_ledger(layers: int, tp: int, sp: bool) -> None:
    pytest.importorskip("megatron.core")
    result, est = _measured(layers, tp, sp)
    ws = unseen(est.heaviest)  # the cuBLAS workspaces: no fake-tensor trace makes them
    low, high = est.peak.low - ws[0], est.peak.high - ws[1]
    mid_error = 100.0 * ((low + high) / 2 - result.peak_bytes) / result.peak_bytes
    print(f"traced {result.peak_bytes:,} ledger {low:,}–{high:,} mid error {mid_error:+.2f} %")
    assert low <= result.peak_bytes <= high


@needs_trace_extra
@pytest.mark.parametrize(
    ("tp", "sp", "recompute"),
    [(1, False, "none"), (2, True, "none"), (1, False, "full")],
    ids=["tp1", "tp2sp", "tp1-full-recompute"],
)
def test_per_layer_saved_activations_lie_inside_the_megatron_profile(
    tp: int, sp: bool, recompute: str
) -> None:
    """Measured when written, per token per layer: 150,664 B (TP 1; ledger
    144,632–154,963), 75,844 B (TP 2 + SP; ledger 72,316–77,482) and, under Megatron's
    full recompute (uniform, 1 layer per checkpoint), 8,192 B — the layer's bf16 input,
    h × 2 B (ledger 8,028–8,602)."""
    pytest.importorskip("megatron.core")
    short, _ = _measured(2, tp, sp, recompute)
    long, est = _measured(4, tp, sp, recompute)
    traced = (long.saved_activations - short.saved_activations) / (2 * SEQ)
    row = next(r for r in est.rows if r.id == "hbm.activations.saved.layers")
    low, high = row.low / (4 * SEQ), row.high / (4 * SEQ)
    print(f"per layer per token: traced {traced:,.0f} B, ledger {low:,.0f}–{high:,.0f} B")
    assert low <= traced <= high


@pytest.mark.parametrize(
    ("changes", "words"),
    [
        ({"parallelism.strategy": "fsdp2"}, "megatron_distopt"),
        ({"parallelism.pp": 2, "parallelism.dp": 4}, "pipeline"),
        ({"parallelism.tp": 3, "parallelism.dp": 1}, "must divide"),
        ({"method.recompute.policy": "selective"}, "recompute"),
        ({"method.kind": "lora"}, "full training"),
    ],
)
def test_refusals_name_the_reason(changes: dict[str, Any], words: str) -> None:
    reason = megatron_refusal(_plan(2, **changes))
    assert reason is not None and words in reason


def test_the_slice_plans_are_runnable_or_say_the_package_is_missing() -> None:
    from engine.trace.megatron.support import MISSING

    for tp, sp in ((1, False), (2, False), (2, True)):
        plan = _plan(2, tp, **{"parallelism.sequence_parallel": sp})
        assert megatron_refusal(plan) in (None, MISSING)


def test_a_missing_megatron_core_is_refused_with_the_install_hint(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Without the package (``megatron`` itself absent, so ``find_spec("megatron.core")``
    would raise) the refusal names the extra instead of failing."""
    import importlib.util

    from engine.trace.megatron import support

    real = importlib.util.find_spec

    def find_spec(name: str, package: str | None = None) -> object:
        return None if name.split(".")[0] == "megatron" else real(name, package)

    monkeypatch.setattr(importlib.util, "find_spec", find_spec)
    assert support.megatron_refusal(_plan(2)) == support.MISSING
