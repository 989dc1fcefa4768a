"""The ``megatron`` profile: Korthikanti et al. 2022, §4, term by term, extended.

For the GPT block (LayerNorm, MHA, GELU MLP with I = 4h, dropout, 16-bit activations,
1-byte dropout masks) the per-layer bytes per micro-batch are

- no parallelism:          sbh(34 + 5as/h)
- tensor parallel t:        sbh(10 + 24/t + 5as/(ht))
- TP + sequence parallel:   sbh(34/t + 5as/(ht))
- selective recompute drops the 5as/h attention-core term; full recompute keeps 2sbh.

Each term below is one of the paper's (§4.1): the attention block's QKV input 2sbh,
Q and K 4sbh, softmax output 2as²b, its dropout mask as²b and output 2as²b, V 2sbh,
projection input 2sbh and dropout mask sbh; the MLP's input 2sbh, GELU input 8sbh and
output 8sbh, dropout mask sbh; two LayerNorm inputs 4sbh. Generalised: K and V have
k·d columns (GQA), the MLP keeps 2·I (fc1 output) + I (activation output) for SwiGLU
instead of I + I for GELU, and flash attention replaces the three s × s tensors with an
fp32 log-sum-exp (4as per token).

Dropout masks are counted whenever the plan trains with dropout (``method.dropout``):
Megatron's ``--hidden-dropout`` and ``--attention-dropout`` default to 0.1
(``megatron/training/arguments.py``), whatever the architecture, and its fused
bias-dropout-add (``megatron/core/fusions/fused_bias_dropout.py``) keeps a 1-byte mask
after the attention projection and after the MLP; the attention-probability dropout
of flash attention runs inside the kernel (no mask). With ``--qk-layernorm``
(``megatron/core/transformer/attention.py``: ``q_layernorm`` / ``k_layernorm`` applied
to the query and key heads) each norm keeps its input for backward: one more Q and K.
An MoE layer keeps its routed token copies as the experts' fc1 input
(:func:`dispatched_tokens`) besides the router's input (the MLP input).
"""

from __future__ import annotations

from engine.ledger.activations.geometry import Geometry, Term


def layer_terms(
    g: Geometry, *, mlp: str, attention: str, selective: bool, dropout: bool, qk_norm: bool = False
) -> list[Term]:
    """One layer's saved tensors, per micro-batch (Korthikanti §4.1, generalised)."""
    c, d = g.compute_bytes, g.head_dim
    q, kv, i = g.heads_local * d, g.kv_local * d, g.inter_local
    terms = [
        Term("LayerNorm 1 input", g.hidden, c, "seq"),
        Term("QKV input", g.hidden, c, "seq"),
    ]
    if qk_norm:
        terms += [Term("Q-norm input", q, c), Term("K-norm input", kv, c)]
    terms += [
        Term("Q", q, c),
        Term("K", kv, c),
    ]
    if attention == "eager":
        if not selective:
            terms.append(Term("softmax output", g.heads_local * g.seq, c))
            if dropout:
                terms.append(Term("softmax dropout mask", g.heads_local * g.seq, 1))
                terms.append(Term("softmax dropout output", g.heads_local * g.seq, c))
    else:
        terms.append(Term("flash log-sum-exp fp32", g.heads_local, 4))
    terms += [Term("V", g.kv_local * g.v_dim, c), Term("projection input", q, c)]
    if dropout:
        terms.append(Term("attention dropout mask", g.hidden, 1, "seq"))
    terms += [
        Term("LayerNorm 2 input", g.hidden, c, "seq"),
        Term("MLP input", g.hidden, c, "seq"),
    ]
    if g.moe is not None:
        terms.append(dispatched_tokens(g))
    if mlp == "gelu":
        terms += [Term("GELU input", i, c), Term("GELU output", i, c)]
    else:
        terms += [Term("fc1 output (gate, up)", 2 * i, c), Term("SwiGLU output", i, c)]
    if dropout:
        terms.append(Term("MLP dropout mask", g.hidden, 1, "seq"))
    return terms


def dispatched_tokens(g: Geometry) -> Term:
    """The routed token copies an MoE layer keeps for backward: the experts' fc1 input.

    Megatron-Core's all-to-all dispatcher (``moe/token_dispatcher.py``
    ``MoEAlltoAllTokenDispatcher``: ``dispatch_preprocess`` → ``moe_utils.permute``,
    ``token_dispatch`` → ``all_to_all``, ``dispatch_postprocess`` → gather over expert
    TP and ``sort_chunks_by_idxs``) makes a new hidden-state row for every routed copy
    of a token — top-k per token, up to the capacity factor more on a busy rank — and
    the last copy is the grouped experts' fc1 input, which ``TEGroupedLinear`` keeps for
    its weight gradient. The earlier copies are freed within the layer (their backward
    needs only indices: ``index_select``, ``all_to_all``, ``cat``), and under EP the
    send / receive pair is the layer's exchange row; with expert TP equal to TP the
    rank holds the whole micro-batch's routed copies, as the fc1 terms assume."""
    assert g.moe is not None
    width = round(g.moe.top_k * g.moe.capacity * g.hidden)
    return Term("dispatched tokens (experts' fc1 input)", width, g.compute_bytes)


def checkpoint_input_terms(g: Geometry) -> list[Term]:
    """Full recompute keeps each layer's input: 2sbh (÷ t under SP)."""
    return [Term("layer input (checkpoint)", g.hidden, g.compute_bytes, "seq")]


def final_terms(g: Geometry) -> list[Term]:
    """The final LayerNorm's input and the output layer's input (last stage)."""
    return [
        Term("final LayerNorm input", g.hidden, g.compute_bytes, "seq"),
        Term("output layer input", g.hidden, g.compute_bytes),
    ]
