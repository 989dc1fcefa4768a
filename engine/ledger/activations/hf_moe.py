"""What a transformers 5 mixture-of-experts block saves for backward.

transformers 5.24 stores each layer's experts fused (one 3-D ``gate_up_proj`` and one
``down_proj``) and runs them through ``grouped_mm_experts_forward``
(``integrations/moe.py``): the T·k (token, expert) pairs are sorted by expert, the
tokens gathered, both projections run as grouped matmuls and the outputs scaled by the
routing weights and summed back. Autograd keeps, per MoE layer:

- the **router**'s own tensors (per kind, below) — its input is the norm's output,
  counted with the norm's consumers; DeepSeek's router runs on an fp32 copy instead;
- the **dispatch bookkeeping**: ``perm // k`` (the gather index), ``perm`` (the routing
  weights' index) and the inverse permutation, int64 per pair, and the int32 offsets;
- the **experts' tensors**: the gathered input (the up projection's input), its output
  (2·I, kept by the activation and the product), the activation and the product (the
  down projection's input), each expert's output and the routing weights (kept by the
  multiply that scales one by the other).

Routers (``<Family>TopKRouter`` / gate modules): a softmax over the experts in fp32 and
the top-k indices (Mixtral, Qwen-MoE; Mixtral also re-normalises the top-k weights in
place, keeping their sum and the result); top-k of the logits then a softmax over the k
(Granite-MoE); a sigmoid with group-limited top-k (DeepSeek-V3); Phi-MoE's sparsemixer
(two masked softmax rounds). Shared experts are a dense MLP on every token; Qwen2-MoE
scales theirs by a sigmoid gate, which keeps the gate and the shared output.
"""

from __future__ import annotations

from dataclasses import dataclass

from engine.ledger.activations.geometry import FP32, INT64, Geometry, Term, Trainability
from engine.ledger.activations.traits import FamilyTraits
from engine.models.spec import MoESpec
from engine.units import ceil_div

INT32 = 4
BOOL = 1


@dataclass(frozen=True, slots=True)
class MoeShapes:
    """One MoE layer's widths on this rank (the experts' intermediate ÷ TP)."""

    experts: int
    top_k: int
    pairs: int  # (token, expert) pairs per token: top_k × capacity factor
    expert_inter: int
    shared_inter: int  # all shared experts together; 0 = none
    shared_gate: bool


def moe_shapes(moe: MoESpec, tp: int) -> MoeShapes:
    shared = moe.shared_experts * (moe.shared_intermediate or moe.expert_intermediate)
    return MoeShapes(
        experts=moe.num_experts,
        top_k=moe.top_k,
        pairs=max(1, round(moe.top_k * moe.capacity_factor)),
        expert_inter=ceil_div(moe.expert_intermediate, tp),
        shared_inter=ceil_div(shared, tp),
        shared_gate=moe.shared_expert_gate,
    )


def router_terms(g: Geometry, tr: Trainability, t: FamilyTraits, m: MoeShapes) -> list[Term]:
    """The router's saved tensors (its input aside, unless it copies it to fp32)."""
    e, k, c = m.experts, m.top_k, g.compute_bytes
    terms: list[Term] = []
    if t.router_fp32_input and "router" in tr.linear_roles:
        terms.append(Term("router fp32 input copy", g.hidden, FP32))
    if t.router == "granite":
        return [
            *terms,
            Term("router top-k indices int64", k, INT64),
            Term("router softmax over the top-k fp32", k, FP32),
        ]
    if t.router == "sparsemixer":
        per_round = [
            Term("sparsemixer mask", e, BOOL),
            Term("sparsemixer argmax int64", 1, INT64),
            Term("sparsemixer masked softmax", e, c),
            Term("sparsemixer selected expert int64", 1, INT64),
            Term("sparsemixer multiplier", 1, c),
        ]
        return terms + [Term(x.name, x.width, x.bpe, count=2) for x in per_round]
    if t.router == "sigmoid_group":
        return [
            *terms,
            Term("router sigmoid fp32", e, FP32),
            Term("group top-2 indices int64 (one group)", 2, INT64),
            Term("group top-k indices int64", 1, INT64),
            Term("group mask", e, BOOL),
            Term("router top-k indices int64", k, INT64),
            Term("top-k weight sum fp32", 1, FP32),
            Term("top-k weights fp32", k, FP32),
        ]
    terms += [Term("router softmax fp32", e, FP32), Term("router top-k indices int64", k, INT64)]
    if t.topk_renorm:
        terms += [Term("top-k weight sum fp32", 1, FP32), Term("top-k weights fp32", k, FP32)]
    return terms


def routing_weight_bytes(g: Geometry, t: FamilyTraits) -> int:
    """The routing weights' element size as the experts multiply by them."""
    if t.routing_dtype_compute or t.router in ("granite", "sparsemixer"):
        return g.compute_bytes
    return FP32


def expert_terms(g: Geometry, tr: Trainability, t: FamilyTraits, m: MoeShapes) -> list[Term]:
    """``grouped_mm_experts_forward``: dispatch bookkeeping and the experts' tensors."""
    c, p, i = g.compute_bytes, m.pairs, m.expert_inter
    trained = bool({"expert_gate", "expert_gate_up"} & tr.linear_roles)
    terms = [
        Term("dispatch indices int64 (perm // k, perm, inverse)", p, INT64, count=3),
        Term("expert offsets int32", m.experts, INT32, "const"),
    ]
    if trained:
        terms.append(Term("gathered token copies (expert inputs)", p * g.hidden, c))
    terms += [
        Term("expert gate_up out (act, product inputs)", p * 2 * i, c),
        Term("expert act out", p * i, c),
    ]
    if trained:
        terms.append(Term("expert product (down input)", p * i, c))
    # the routing weights need a gradient whenever the layer's input does (they are
    # computed from it), so each expert output is kept for their multiply
    terms.append(Term("routing weights per pair", p, routing_weight_bytes(g, t)))
    terms.append(Term("expert outputs (kept for the routing-weight multiply)", p * g.hidden, c))
    return terms


def shared_terms(g: Geometry, tr: Trainability, m: MoeShapes, act_terms: list[Term]) -> list[Term]:
    """The shared experts (a dense MLP, ``act_terms``) and Qwen2-MoE's sigmoid gate: the
    multiply keeps both (the gate needs a gradient whenever the layer's input does)."""
    if not m.shared_inter:
        return []
    terms = list(act_terms)
    if m.shared_gate:
        terms += [
            Term("shared expert sigmoid gate", 1, g.compute_bytes),
            Term("shared expert output (the gate multiply's input)", g.hidden, g.compute_bytes),
        ]
    return terms
