"""The ``hf-transformers`` profile: what a Llama-family decoder layer saves for backward.

Counted op by op as Hugging Face transformers runs ``LlamaDecoderLayer`` with PyTorch
autograd, which saves a tensor only when a required gradient needs it:

- RMSNorm upcasts its input to fp32 (``pow`` and the ``rsqrt`` multiply keep the fp32
  input and the per-token rsqrt), keeps the normalised tensor only when its weight is
  trained, and its output is kept by the next linear only when that linear's weight is
  trained (under autocast each linear keeps its own 16-bit cast instead).
- Rotary embedding multiplies by cos / sin, which do not need a gradient, so only the
  shared cos / sin are kept — not q, k or rotate_half(q).
- SDPA (flash / memory-efficient kernels) keeps q, k, v, its output and an fp32
  log-sum-exp per head and token; GQA runs without repeating K/V (enable_gqa). Eager
  attention keeps the repeated K/V, the fp32 softmax and its 16-bit copy (s × s).
- SwiGLU keeps gate, act(gate), up, and the product (input of down_proj).
- PEFT LoRA casts the adapter input to the adapter dtype (fp32 by default) per adapter,
  and B keeps A's output.

Measured totals (../shared/reference/measured) are reproduced to the byte; see
tests/engine/activations/test_hf_measured.py.
"""

from __future__ import annotations

from engine.ledger.activations.geometry import FP32, Geometry, Term, Trainability


def norm_terms(
    g: Geometry, tr: Trainability, label: str, input_needs_grad: bool, consumers: tuple[str, ...]
) -> list[Term]:
    """RMSNorm and the saved input of the linears that read its output."""
    terms: list[Term] = []
    if input_needs_grad:
        terms.append(Term(f"{label} fp32 input", g.hidden, FP32, "seq"))
        terms.append(Term(f"{label} rsqrt", 1, FP32, "seq"))
    if tr.norms:
        terms.append(Term(f"{label} normalised", g.hidden, g.residual_bytes, "seq"))
    out_bytes = FP32 if g.autocast else g.compute_bytes
    trained_base = [c for c in consumers if c in tr.linear_roles]
    if g.autocast:
        if trained_base:
            terms.append(
                Term(
                    f"{label} out, 16-bit cast per linear",
                    g.hidden,
                    g.compute_bytes,
                    count=len(trained_base),
                )
            )
    elif trained_base:
        terms.append(Term(f"{label} out", g.hidden, out_bytes))
    terms += adapter_terms(g, tr, label, [(c, g.hidden) for c in consumers], out_bytes)
    return terms


def adapter_terms(
    g: Geometry, tr: Trainability, label: str, inputs: list[tuple[str, int]], in_bytes: int
) -> list[Term]:
    """LoRA adapters on linears reading an input of ``width`` elements in ``in_bytes``."""
    terms: list[Term] = []
    for role, width in inputs:
        if role not in tr.adapter_roles:
            continue
        if g.autocast:
            terms.append(Term(f"lora {role} input cast", width, g.compute_bytes))
            a_bytes = g.compute_bytes
        else:
            shared = tr.adapter_bytes == in_bytes and not tr.adapter_dropout
            if not shared:
                terms.append(Term(f"lora {role} input ({label})", width, tr.adapter_bytes))
            a_bytes = tr.adapter_bytes
        if tr.adapter_dropout:
            terms.append(Term(f"lora {role} dropout mask", width, 1))
        terms.append(Term(f"lora {role} A out", tr.rank, a_bytes))
    return terms


def attention_terms(g: Geometry, tr: Trainability, attention: str, selective: bool) -> list[Term]:
    """The attention core and o_proj's input."""
    c, d = g.compute_bytes, g.head_dim
    q, kv = g.heads_local * d, g.kv_local * d
    if attention == "eager":
        terms = [
            Term("q (roped)", q, c),
            Term("k, v repeated to all heads", q, c, count=2),
        ]
        if not selective:
            terms += [
                Term("softmax fp32 (s×s)", g.heads_local * g.seq, FP32),
                Term("softmax 16-bit copy (s×s)", g.heads_local * g.seq, c),
            ]
        if tr.needs_input("o"):
            terms.append(Term("attn output (contiguous copy, o_proj input)", q, c))
    else:
        v = g.kv_local * g.v_dim
        terms = [
            Term("q (roped)", q, c),
            Term("k (roped)", kv, c),
            Term("v", v, c),
            Term("attn output", g.heads_local * g.v_dim, c),
            Term("log-sum-exp fp32", g.heads_local, FP32),
        ]
    if g.mla is not None:
        terms += mla_latent_terms(g)
    terms += adapter_terms(g, tr, "attn output", [("o", q)], c)
    return terms


def mla_latent_terms(g: Geometry) -> list[Term]:
    """MLA's low-rank latents: each RMSNorm keeps its fp32 input and rsqrt, and the
    up-projections (q_b, kv_b) keep their normalised inputs (DeepSeek-V3 modelling)."""
    assert g.mla is not None
    c = g.compute_bytes
    terms: list[Term] = []
    for name, width in (("q latent", g.mla.q_rank), ("kv latent", g.mla.kv_rank)):
        if width:
            terms += [
                Term(f"{name} fp32 norm input", width, FP32),
                Term(f"{name} rsqrt", 1, FP32),
                Term(f"{name} normalised (up-projection input)", width, c),
            ]
    terms.append(Term("k rope part (shared by heads)", g.mla.rope_dim, c))
    return terms


def moe_terms(g: Geometry) -> list[Term]:
    """Routing of an MoE layer (HF Mixtral / Qwen3-MoE / DeepSeek-V3 style): fp32
    softmax of the router logits over every expert, the top-k weights, and each routed
    expert's gathered copy of its tokens' hidden states (its linears' input)."""
    assert g.moe is not None
    c, m = g.compute_bytes, g.moe
    pairs = round(m.top_k * m.capacity)
    return [
        Term("router softmax fp32", m.experts, FP32),
        Term("top-k routing weights fp32", m.top_k, FP32),
        Term("dispatched token copies (expert inputs)", g.hidden, c, count=pairs),
    ]


def mlp_terms(g: Geometry, tr: Trainability, mlp: str) -> list[Term]:
    c, i = g.compute_bytes, g.inter_local
    if mlp == "gelu":
        terms = [Term("up out (act input)", i, c)]
        if "down" in tr.linear_roles:
            terms.append(Term("act out", i, c))
    else:
        terms = [Term("gate out, act(gate), up out", i, c, count=3)]
        if "down" in tr.linear_roles:
            terms.append(Term("gate·up product", i, c))
    terms += adapter_terms(g, tr, "mlp product", [("down", i)], c)
    if g.moe is not None:
        terms += moe_terms(g)
    return terms


def layer_terms(
    g: Geometry,
    tr: Trainability,
    *,
    mlp: str,
    attention: str,
    selective: bool,
    input_needs_grad: bool,
) -> list[Term]:
    """Everything one decoder layer saves for backward, per micro-batch."""
    mlp_in = ("up",) if mlp == "gelu" else ("gate", "up")
    return [
        *norm_terms(g, tr, "input_layernorm", input_needs_grad, ("q", "k", "v")),
        *attention_terms(g, tr, attention, selective),
        *norm_terms(g, tr, "post_attention_layernorm", True, mlp_in),
        *mlp_terms(g, tr, mlp),
    ]


def final_norm_terms(g: Geometry, tr: Trainability) -> list[Term]:
    """The final norm and lm_head's saved input (on the last pipeline stage)."""
    roles = frozenset({"lm_head"}) if tr.lm_head else frozenset()
    head = Trainability(
        tr.embedding,
        tr.norms,
        tr.lm_head,
        roles,
        tr.adapter_roles & {"lm_head"},
        tr.rank,
        tr.adapter_bytes,
        tr.adapter_dropout,
    )
    return norm_terms(g, head, "final norm", True, ("lm_head",))


def checkpoint_input_terms(g: Geometry) -> list[Term]:
    """What a checkpointed layer keeps: its input hidden states (residual dtype)."""
    return [Term("layer input (checkpoint)", g.hidden, g.residual_bytes, "seq")]
