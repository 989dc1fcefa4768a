"""The ``hf-transformers`` profile: what one decoder layer saves for backward, per family.

Counted op by op as transformers 5.24 runs each family's ``<Family>DecoderLayer`` with
PyTorch autograd, which saves a tensor only when a required gradient needs it. The
family's implementation facts are in :mod:`~engine.ledger.activations.traits`, the
norms in :mod:`~engine.ledger.activations.hf_norms`, attention in
:mod:`~engine.ledger.activations.hf_attention`, the MoE block in
:mod:`~engine.ledger.activations.hf_moe`. Here the MLP and the layer:

- **MLP**: a gated MLP keeps gate, act(gate), up and the product (down_proj's input);
  an ungated one the up output and act(up); GPT-2's composite ``gelu_new``
  (``NewGELUActivation``: pow, tanh, two products) keeps four tensors of the
  intermediate width (x, tanh, 0.5·x and 1 + tanh);
- **residual layouts**: sequential (two norms), Gemma's sandwich (four), OLMo-2's
  post-norms (the projections read the residual itself), parallel (one norm read by
  attention and MLP: Cohere, Falcon-7B, StableLM-2-12B), parallel with two norms of the
  same input (GPT-NeoX, Falcon-40B: a LayerNorm input kept once);
- PEFT LoRA casts the adapter input to the adapter dtype (fp32 by default) per adapter,
  and B keeps A's output.

Measured totals (../shared/reference/measured) are reproduced to the byte (tests/engine/
ledger/activations/test_hf_measured.py), and every family's layer against autograd's
own saved set (tests/trace/test_saved_tensors.py).
"""

from __future__ import annotations

from engine.ledger.activations import hf_moe as moe
from engine.ledger.activations.geometry import Geometry, Term
from engine.ledger.activations.hf_attention import attention_terms
from engine.ledger.activations.hf_layer import (
    HfLayer,
    attention_roles,
    mlp_roles,
    moe_roles,
    needs_grad,
)
from engine.ledger.activations.hf_norms import (
    NormSite,
    adapter_terms,
    consumer_terms,
    input_kept,
    norm_saved,
)
from engine.ledger.activations.traits import traits_of
from engine.models.spec import ArchitectureSpec
from engine.units import ceil_div


def hidden_norm(
    c: HfLayer, label: str, ing: bool, consumers: tuple[str, ...], shared: bool = False
) -> list[Term]:
    """A norm of the residual stream and its output kept by the linears that read it."""
    g = c.g
    site = NormSite(label, c.t.norm, g.hidden, g.residual_bytes, ing, input_shared=shared)
    terms = norm_saved(g, c.tr, site, c.param_fp32)
    return terms + consumer_terms(g, c.tr, label, g.hidden, consumers)


def _post_norm(c: HfLayer, label: str) -> list[Term]:
    """A norm on a block's output (Gemma's sandwich, OLMo-2): nothing reads it but the
    residual add, so only the norm's own tensors."""
    g = c.g
    site = NormSite(label, c.t.norm, g.hidden, g.compute_bytes)
    return norm_saved(g, c.tr, site, c.param_fp32)


def activation_terms(c: HfLayer, width: int, label: str, down_saved: bool) -> list[Term]:
    """The MLP's activation on an intermediate of ``width``: gated or not, by the family's
    ``hidden_act`` (``down_saved``: down_proj keeps its input)."""
    cb = c.g.compute_bytes
    if c.arch.mlp == "gelu":
        if c.t.activation == "gelu_new":
            terms = [Term(f"{label} gelu_new: x, tanh, 0.5·x, 1 + tanh", width, cb, count=4)]
        else:
            terms = [Term(f"{label} up out (act input)", width, cb)]
        if down_saved:
            terms.append(Term(f"{label} act out", width, cb))
        return terms
    terms = [Term(f"{label} gate out, act(gate), up out", width, cb, count=3)]
    if down_saved:
        terms.append(Term(f"{label} gate·up product", width, cb))
    return terms


def dense_mlp_terms(c: HfLayer, width: int, in_grad: bool = True) -> list[Term]:
    """A dense MLP; nothing before down_proj is kept when no gradient flows through it."""
    g, tr = c.g, c.tr
    down = input_kept(g, tr, ("down",), g.compute_bytes)
    if needs_grad(tr, in_grad, mlp_roles(c)):
        terms = activation_terms(c, width, "mlp", down)
    else:
        terms = [Term("mlp act out (down input)", width, g.compute_bytes)] if down else []
    return terms + adapter_terms(g, tr, "mlp product", [("down", width)], g.compute_bytes)


def moe_mlp_terms(c: HfLayer) -> list[Term]:
    """Router, dispatch, routed experts and shared experts of one MoE layer."""
    assert c.arch.moe is not None
    g, tr, t = c.g, c.tr, c.t
    m = moe.moe_shapes(c.arch.moe, g.tp)
    terms = moe.router_terms(g, tr, t, m) + moe.expert_terms(g, tr, t, m)
    shared = activation_terms(c, m.shared_inter, "shared expert", "shared_down" in tr.linear_roles)
    return terms + moe.shared_terms(g, tr, m, shared)


def layer_terms(c: HfLayer, *, moe_layer: bool, dense_width: int, ing: bool) -> list[Term]:
    """Everything one decoder layer saves for backward, per micro-batch (``ing``: its
    input needs a gradient — not the first layer after a frozen embedding)."""
    a, t, tr = c.arch, c.t, c.tr
    qkv = attention_roles(c)
    mlp_in = moe_roles(c) if moe_layer else mlp_roles(c)
    norm_grad = ing or tr.norms  # a norm's output needs a gradient
    attn_grad = needs_grad(tr, norm_grad, (*qkv, "o"))  # the attention block's output

    def mlp(in_grad: bool) -> list[Term]:
        return moe_mlp_terms(c) if moe_layer else dense_mlp_terms(c, dense_width, in_grad)

    if a.residual == "parallel":
        return [
            *hidden_norm(c, "input_layernorm", ing, qkv + mlp_in),
            *attention_terms(c, norm_grad),
            *mlp(norm_grad),
        ]
    if a.residual == "parallel_two_norms":
        return [
            *hidden_norm(c, "attention norm", ing, qkv),
            *hidden_norm(c, "mlp norm", ing, mlp_in, shared=t.norm == "layernorm"),
            *attention_terms(c, norm_grad),
            *mlp(norm_grad),
        ]
    residual_grad = ing or attn_grad  # the residual after the attention block
    if not t.pre_norms:  # OLMo-2: the projections read the residual stream itself
        g = c.g
        return [
            *consumer_terms(g, tr, "layer input", g.hidden, qkv),
            *attention_terms(c, ing),
            *(_post_norm(c, "post_attention_layernorm") if attn_grad else []),
            *consumer_terms(g, tr, "residual", g.hidden, mlp_in),
            *mlp(residual_grad),
            *_post_norm(c, "post_feedforward_layernorm"),
        ]
    terms = [*hidden_norm(c, "input_layernorm", ing, qkv), *attention_terms(c, norm_grad)]
    if t.post_norms and attn_grad:  # Gemma's sandwich: a norm on each block's output too
        terms += _post_norm(c, "post_attention_layernorm")
    mlp_norm = "pre_feedforward_layernorm" if t.post_norms else "post_attention_layernorm"
    terms += hidden_norm(c, mlp_norm, residual_grad, mlp_in)
    terms += mlp(residual_grad or tr.norms)
    if t.post_norms:
        terms += _post_norm(c, "post_feedforward_layernorm")
    return terms


def final_norm_terms(c: HfLayer) -> list[Term]:
    """The final norm and lm_head's saved input (on the last pipeline stage)."""
    tr = c.tr
    roles = frozenset({"lm_head"}) if tr.lm_head else frozenset()
    head = tr.__class__(
        tr.embedding,
        tr.norms,
        tr.lm_head,
        roles,
        tr.adapter_roles & {"lm_head"},
        tr.rank,
        tr.adapter_bytes,
        tr.adapter_dropout,
    )
    return hidden_norm(c.with_trainability(head), "final norm", True, ("lm_head",))


def rotary_dim(arch: ArchitectureSpec, g: Geometry) -> int:
    """Elements of each cos / sin row: the rotated part of a head (MLA: its rope dims)."""
    if g.mla is not None:
        return g.mla.rope_dim
    return int(g.head_dim * traits_of(arch).rotary_fraction)


def checkpoint_input_terms(g: Geometry) -> list[Term]:
    """What a checkpointed layer keeps: its input hidden states (residual dtype)."""
    return [Term("layer input (checkpoint)", g.hidden, g.residual_bytes, "seq")]


def dense_width(arch: ArchitectureSpec, tp: int) -> int:
    """The intermediate of the dense layers (an MoE model's own dense width)."""
    m = arch.moe
    width = arch.intermediate if m is None else (m.dense_intermediate or arch.intermediate)
    return ceil_div(width, tp)
