"""Megatron-Core's saved activations and loss the source review found wrong (R5 and
issue 35 item 5), derived by hand from Megatron-LM's code (NVIDIA/Megatron-LM d98e8a6).

Two plans: Llama-3.1-8B (the default plan) under ``megatron_distopt`` — s = 4096, b = 1,
V = 128,256, bf16; and the open-sci-ref 1.7B reference run (the shared dev case
megatron-1.7b-dp252-alloc): 24 layers × h 2048, 32 MHA heads, FFN 8192 SwiGLU, QK
layernorm, tied, vocab 50,432, s 4096, micro-batch 4, DP 252, distributed optimizer,
selective recompute, flash attention, A100 64 GB.
"""

from __future__ import annotations

from typing import Any

from ledger_plans import make_plan

from engine.estimate import estimate
from engine.ledger.activations import megatron as mg
from engine.ledger.activations.geometry import geometry, terms_bytes, trainability
from engine.ledger.row import Row
from engine.plan import Plan, with_values
from engine.presets import plan_for_model_preset
from engine.stacks.defaults import resolved
from tests.engine.allocator.published import MEGATRON_1_7B

GIB = 2**30
LOGITS_8B = 4096 * 128_256 * 2  # 1,050,673,152 B, a multiple of 512


def _rows(plan: Plan) -> dict[str, Row]:
    return {r.id: r for r in estimate(plan).rows}


def test_megatron_loss_counts_its_fp32_upcast_once() -> None:
    """R5. ``cross_entropy.py`` ``calculate_logits_max`` upcasts (``.float()``),
    ``calculate_predicted_logits`` exponentiates into that same tensor
    (``torch.exp(..., out=exp_logits)``) and ``calculate_cross_entropy_loss`` divides it
    in place (``exp_logits.div_``): the fp32 copy *is* the saved softmax, 4096 · 128,256
    · 4 = 2,101,346,304 B. Forward adds only the bf16 logits, 1,050,673,152 B (was
    3,152,019,456 with a second fp32 copy). Backward (``calculate_gradients``) works in
    place (``grad_input.mul_``) and autograd casts the fp32 result to the bf16 logits'
    dtype: 1,050,673,152 B (was 2,101,346,304), live with the output layer's bf16 input
    gradient 4096 · 4096 · 2 = 33,554,432 B (``tensor_parallel/layers.py``
    ``LinearWithGradAccumulationAndAsyncCommunication.backward``: ``grad_output.matmul(
    weight)``; tests/engine/ledger/test_megatron_ddp_rows.py)."""
    rows = _rows(make_plan(parallelism__strategy="megatron_distopt"))
    assert rows["hbm.loss.saved"].high == 2 * LOGITS_8B == 2_101_346_304
    assert rows["hbm.loss.forward_transient"].high == LOGITS_8B == 1_050_673_152
    assert rows["hbm.loss.backward_transient"].high == LOGITS_8B + 4096 * 4096 * 2


def test_hf_loss_keeps_its_two_fp32_copies() -> None:
    """The HF causal-LM loss (the default plan) is unchanged: the bf16 logits and their
    fp32 upcast in forward (``log_softmax``'s output is the saved row), and two fp32
    gradients in its backward."""
    rows = _rows(make_plan())
    assert rows["hbm.loss.forward_transient"].high == LOGITS_8B + 2 * LOGITS_8B
    assert rows["hbm.loss.backward_transient"].high == 2 * 2 * LOGITS_8B


def _open_sci_ref(**changes: Any) -> Plan:
    """The open-sci-ref 1.7B Megatron run's plan (the published suite's case, as the
    allocator calibration builds it)."""
    return with_values(plan_for_model_preset("llama-3.2-1b"), {**MEGATRON_1_7B, **changes})


def _layer_bytes(plan: Plan, *, dropout: bool, qk_norm: bool) -> int:
    r = resolved(plan)
    g = geometry(r)
    terms = mg.layer_terms(
        g, mlp="swiglu", attention="flash_attn", selective=True, dropout=dropout, qk_norm=qk_norm
    )
    return terms_bytes(terms, g)


def test_megatron_keeps_dropout_masks_by_default() -> None:
    """``megatron/training/arguments.py``: ``--hidden-dropout`` and ``--attention-dropout``
    default to 0.1 (the stack default: method.dropout 0.1 under megatron_core, whatever
    the family). The fused bias-dropout-add (``fusions/fused_bias_dropout.py``) keeps a
    1-byte mask after the attention projection and after the MLP: 2 · s·b·h = 2 · 4096 ·
    4 · 2048 = 67,108,864 B per layer; flash attention's probability dropout keeps no
    mask. A Llama-family plan on another stack trains without dropout."""
    plan = _open_sci_ref()
    assert resolved(plan).method.dropout == 0.1
    assert trainability(resolved(plan)).dropout
    assert resolved(make_plan()).method.dropout == 0.0
    with_masks = _layer_bytes(plan, dropout=True, qk_norm=False)
    assert with_masks - _layer_bytes(plan, dropout=False, qk_norm=False) == 67_108_864
    assert not trainability(resolved(_open_sci_ref(**{"method.dropout": 0.0}))).dropout


def test_qk_layernorm_keeps_its_inputs() -> None:
    """``--qk-layernorm`` (``transformer/attention.py``: ``q_layernorm`` / ``k_layernorm``
    over each head) keeps the query and key before the norm for backward: (32 + 32) ·
    64 · 2 B per token × 16,384 tokens = 134,217,728 B per layer."""
    plan = _open_sci_ref()
    with_norm = _layer_bytes(plan, dropout=False, qk_norm=True)
    assert with_norm - _layer_bytes(plan, dropout=False, qk_norm=False) == 134_217_728


def test_open_sci_ref_allocated_peak_holds_the_measured_figure() -> None:
    """The Megatron-LM log's ``max allocated: 50277.15625`` MB = 49.10 GiB lies inside
    the plan's allocated range now that the grad buffer (R1), the dropout masks and the
    QK-norm inputs are counted and the loss's double count (R5) is gone: the 24 layers'
    masks and norm inputs add 24 × (67,108,864 + 134,217,728) = 4,831,838,208 B."""
    est = estimate(_open_sci_ref())
    measured = 50277.15625 * 2**20
    assert est.peak.low <= measured <= est.peak.high


def test_moe_layer_keeps_its_dispatched_token_copies() -> None:
    """Megatron-Core's all-to-all dispatcher (``moe/token_dispatcher.py``
    ``MoEAlltoAllTokenDispatcher``: ``moe_utils.permute`` → ``all_to_all`` →
    ``sort_chunks_by_idxs``) makes one hidden-state row per routed copy of a token; the
    last copy is the grouped experts' fc1 input, kept by ``TEGroupedLinear`` for its
    weight gradient. Mixtral-8x7B (top-2, h 4096) at s 4096, b 1, TP 2 (expert TP equal
    to it): 4096 · 2 · 4096 · 2 B = 67,108,864 B per MoE layer, a term of its own beside
    the router's input."""
    plan = resolved(
        with_values(
            plan_for_model_preset("mixtral-8x7b"),
            {
                "parallelism.strategy": "megatron_distopt",
                "parallelism.tp": 2,
                "parallelism.ep": 8,
                "parallelism.dp": 8,
            },
        )
    )
    g = geometry(plan)
    terms = mg.layer_terms(g, mlp="swiglu", attention="flash_attn", selective=False, dropout=False)
    (copies,) = [t for t in terms if t.name == "dispatched tokens (experts' fc1 input)"]
    assert copies.bytes(g) == 4096 * 2 * 4096 * 2 == 67_108_864
    dense = resolved(make_plan(parallelism__strategy="megatron_distopt"))
    names = {
        t.name
        for t in mg.layer_terms(
            geometry(dense), mlp="swiglu", attention="flash_attn", selective=False, dropout=False
        )
    }
    assert "dispatched tokens (experts' fc1 input)" not in names
