"""The megatron profile reproduces Korthikanti et al. 2022 (§4, Table 2) exactly.

Per layer, per micro-batch, GPT block with 16-bit activations and 1-byte dropout masks:
no parallelism sbh(34 + 5as/h); TP sbh(10 + 24/t + 5as/(ht)); TP+SP sbh(34/t + 5as/(ht));
TP + selective sbh(10 + 24/t); TP + SP + selective 34sbh/t; full recompute 2sbh.

Worked example (the paper's GPT-3 175B row): s = 2048, b = 1, h = 12288, a = 96, t = 8.
sbh = 25,165,824; 5as/h = 5·96·2048/12288 = 80; so no parallelism 114·sbh =
2,868,903,936 B; TP 8: 10 + 3 + 10 = 23 → 578,813,952 B; TP+SP: 4.25 + 10 → 358,612,992 B;
TP+SP+selective: 4.25·sbh = 106,954,752 B.
"""

from __future__ import annotations

from fractions import Fraction

from hypothesis import given, settings
from hypothesis import strategies as st

from engine.ledger.activations.geometry import Geometry, terms_bytes
from engine.ledger.activations.megatron import checkpoint_input_terms, layer_terms
from engine.ledger.activations.schedule import in_flight
from engine.plan import default_plan, with_values


def gpt(s: int, b: int, h: int, a: int, t: int, sp: bool) -> Geometry:
    return Geometry(
        micro_batch=b,
        seq=s,
        hidden=h,
        heads=a,
        kv_heads=a,
        head_dim=h // a,
        inter=4 * h,
        vocab=50257,
        tp=t,
        sp=sp,
        compute_bytes=2,
        embed_bytes=2,
        autocast=False,
        granularity=1,
    )


def layer(g: Geometry, selective: bool = False) -> int:
    return terms_bytes(
        layer_terms(g, mlp="gelu", attention="eager", selective=selective, dropout=True), g
    )


def test_gpt3_175b_worked_example() -> None:
    assert layer(gpt(2048, 1, 12288, 96, 1, False)) == 2_868_903_936
    assert layer(gpt(2048, 1, 12288, 96, 8, False)) == 578_813_952
    assert layer(gpt(2048, 1, 12288, 96, 8, True)) == 358_612_992
    assert layer(gpt(2048, 1, 12288, 96, 8, True), selective=True) == 106_954_752


@settings(max_examples=60, deadline=None)
@given(
    s=st.sampled_from([128, 512, 2048, 4096]),
    b=st.integers(1, 4),
    a=st.sampled_from([8, 16, 32, 64]),
    d=st.sampled_from([64, 128]),
    t=st.sampled_from([1, 2, 4, 8]),
)
def test_paper_formulas_for_every_setting(s: int, b: int, a: int, d: int, t: int) -> None:
    """Each of Table 2's rows, as exact fractions of sbh (t divides a and s here)."""
    h = a * d
    sbh = Fraction(s * b * h)
    attn = Fraction(5 * a * s, h)
    assert layer(gpt(s, b, h, a, t, False)) == sbh * (10 + Fraction(24, t) + attn / t)
    assert layer(gpt(s, b, h, a, t, False), True) == sbh * (10 + Fraction(24, t))
    assert layer(gpt(s, b, h, a, t, True)) == sbh * (Fraction(34, t) + attn / t)
    assert layer(gpt(s, b, h, a, t, True), True) == sbh * Fraction(34, t)
    full = terms_bytes(checkpoint_input_terms(gpt(s, b, h, a, t, False)), gpt(s, b, h, a, t, False))
    assert full == 2 * sbh


def test_gqa_and_swiglu_extension() -> None:
    """Llama-3-8B shape (h 4096, a 32, k 8, d 128, I 14336), s 4096, b 1, flash, no dropout:
    norm inputs 2·2h + QKV input 2h + Q 2h + K 2kd + V 2kd + proj input 2h + MLP input 2h
    + fc1 output 2·2I + SwiGLU output 2I + lse 4a, per token
    = 12·4096 + 4·1024 + 6·14336 + 128 = 49,152 + 4,096 + 86,016 + 128 = 139,392 B;
    × 4096 tokens = 570,949,632 B."""
    g = Geometry(
        micro_batch=1,
        seq=4096,
        hidden=4096,
        heads=32,
        kv_heads=8,
        head_dim=128,
        inter=14336,
        vocab=128256,
        tp=1,
        sp=False,
        compute_bytes=2,
        embed_bytes=2,
        autocast=False,
        granularity=512,
    )
    terms = layer_terms(g, mlp="swiglu", attention="sdpa_flash", selective=False, dropout=False)
    assert terms_bytes(terms, g) == 570_949_632


def _pp(pp: int, v: int, m: int) -> object:
    sched = "interleaved_1f1b" if v > 1 else "1f1b"
    return with_values(
        default_plan(),
        {
            "parallelism.pp": pp,
            "parallelism.virtual_stages": v,
            "parallelism.pp_schedule": sched,
            "batch.grad_accum": m,
        },
    )


def test_1f1b_first_stage_holds_p_micro_batches() -> None:
    """1F1B: stage s holds min(p − s, m): p = 4, m = 8 → 4, 3, 2, 1."""
    plan = _pp(4, 1, 8)
    got = [in_flight(plan, s) for s in range(4)]  # type: ignore[arg-type]
    assert [(f.num, f.den) for f in got] == [(4, 1), (3, 1), (2, 1), (1, 1)]


def test_interleaved_first_stage_factor() -> None:
    """Interleaved 1F1B, p = 4, v = 2: the first stage holds L/p layers × p × (1 + (p−1)/(pv))
    = L/p × 4 × 11/8 = 5.5 micro-batches of its layers (Korthikanti eq. 4); Megatron's
    warm-up gives 2(p−1) + (v−1)p + 1 = 11 chunk forwards of half the stage."""
    for p, v in [(4, 2), (8, 4), (2, 3)]:
        f = in_flight(_pp(p, v, 64), 0)  # type: ignore[arg-type]
        assert Fraction(f.num, f.den) == p * (1 + Fraction(p - 1, p * v))


def test_gpipe_holds_every_micro_batch() -> None:
    plan = with_values(
        default_plan(),
        {"parallelism.pp": 4, "parallelism.pp_schedule": "gpipe", "batch.grad_accum": 16},
    )
    assert (in_flight(plan, 3).num, in_flight(plan, 3).den) == (16, 1)
