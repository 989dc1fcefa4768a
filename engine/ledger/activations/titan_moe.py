"""A torchtitan MoE block: what it saves for backward, and its backward's working set.

torchtitan 0.3.0 runs its own MoE (``torchtitan/models/common/moe.py``,
``token_dispatcher.py``, ``ops/scatter_add.py``), not transformers'. Per token, with h the
hidden width, E experts, k = top-k (token, expert) pairs, F the expert's width on this
rank, c the compute dtype's bytes (bf16 under FSDP2's ``MixedPrecisionPolicy``):

- **router** (``TokenChoiceTopKRouter.forward``): ``self.gate(x)`` under
  ``torch.autocast(dtype=float32)`` copies its input to fp32 (h·4 kept by the mm) and the
  gate weight to fp32 (E·h·4 a layer, kept); the softmax (or sigmoid) keeps its fp32
  output (E·4), which the top-k weights' ``gather`` reads too; ``topk`` keeps its int64
  indices (k·8). ``route_norm`` (qwen3: ``models/qwen3/__init__.py``, ``route_norm=True``)
  divides the gathered weights by their sum: the division keeps both (k·4 + 4);
- the ``ffn_norm`` output is read only by the gate's fp32 cast and the dispatch's
  index, whose backwards keep nothing of it: it is not kept (a shared expert's mms would);
- **dispatch** (``LocalTokenDispatcher._local_reorder``): ``argsort`` of the expert ids
  (k·8, kept by the scores' index) and ``// top_k`` (k·8, kept by the token gather);
  ``torch.cumsum`` offsets, int32 E·4 a layer, kept by ``_grouped_mm``;
- **experts** (``GroupedExperts.forward``): the gathered input (k·h·c) kept by the w1
  and w3 grouped mms, w1's output (silu's input), silu's output and w3's output (kept
  by the product) and the product (w2's input): 4·k·F·c;
- **combine** (``LocalTokenDispatcher.combine``): ``routed_output.to(float32) *
  scores`` keeps the fp32 copy of the expert outputs (k·h·4) and the sorted fp32 scores
  (k·4); ``deterministic_scatter_add`` keeps only its index (a view of ``// top_k``).

**Per-op SAC** (``SelectiveAC``, ``distributed/activation_checkpoint.py``): the save
list is torch's compute-intensive ops (mm, bmm, addmm, SDPA...; not ``_grouped_mm``)
plus linear, flex attention, ``topk``, ``max`` and the collectives; the router's gate
is force-recomputed (``force_recompute_mm_shapes_by_fqns = ["moe.router.gate"]``, not
counted as an mm). So a MoE block keeps its input, wqkv's output (mm 1; wo, mm 2, is
recomputed), the flex outputs (out, log-sum-exp, row max) and ``topk``'s values (fp32,
k·4) and indices (k·8); nothing of the experts.

**Working set** (traced: ``tests/fidelity_grid.py --titan --families qwen3_moe``, FSDP2
× 8: the peak is in layer 0's backward at the w1 ``_grouped_mm``): by then the
combine's, w2's, the product's and silu's saved tensors are freed (k·h·4 + k·4 +
4·k·F·c) while w2's, w3's and w1's unsharded expert gradients (3·E·F·h·c a layer,
live until FSDP2's post-backward reduce-scatter), the w3 and w1 input gradients (2·k·h·c),
silu's gradient (k·F·c) and the layer's output gradient (h·c) are live.
"""

from __future__ import annotations

from collections.abc import Callable

from engine.ledger.activations import torchtitan as tt
from engine.ledger.activations.geometry import (
    FP32,
    INT64,
    Geometry,
    Term,
    terms_bytes,
    terms_formula,
)
from engine.ledger.activations.hf_moe import INT32, MoeShapes, moe_shapes
from engine.ledger.activations.torchtitan import attention_op_sac_terms, norm_terms
from engine.ledger.row import Formula
from engine.models.spec import ArchitectureSpec
from engine.plan import Plan
from engine.stacks.families import family_of
from engine.units import ceil_div, fmt_count

ROUTE_NORM_FAMILIES = frozenset({"qwen3_moe"})
"""Families whose torchtitan router divides the top-k weights by their sum."""


def moe_mlp_terms(g: Geometry, m: MoeShapes, route_norm: bool) -> list[Term]:
    """The MoE block's saved set after attention: ffn_norm, router, dispatch, experts,
    combine (module docstring)."""
    c, h, k, e = g.compute_bytes, g.hidden, m.pairs, m.experts
    terms = [
        *norm_terms(g, "ffn_norm"),
        Term("router gate fp32 input copy", h, FP32),
        Term("router gate fp32 weight copy", e * h, FP32, "const"),
        Term("router scores fp32 (softmax / sigmoid output)", e, FP32),
        Term("router top-k indices int64", k, INT64),
    ]
    if route_norm:
        terms.append(Term("top-k weights and their sum fp32 (route_norm)", k + 1, FP32))
    terms += [
        Term("dispatch argsort and // top_k int64", k, INT64, count=2),
        Term("expert offsets int32", e, INT32, "const"),
        Term("gathered token copies (w1, w3 input)", k * h, c),
        *freed_terms(g, m),
    ]
    if m.shared_inter:
        terms += [
            Term("ffn_norm output (shared experts' input)", h, c),
            Term("shared w1 out, silu out, w3 out, product", m.shared_inter, c, count=4),
        ]
    return terms


def freed_terms(g: Geometry, m: MoeShapes) -> list[Term]:
    """The saved tensors the experts' backward has freed by w1's grouped mm backward."""
    c, h, k = g.compute_bytes, g.hidden, m.pairs
    return [
        Term("w1 out, silu out, w3 out, product", k * m.expert_inter, c, count=4),
        Term("expert outputs fp32 copy (combine)", k * h, FP32),
        Term("sorted routing scores fp32 (combine)", k, FP32),
    ]


def op_sac_terms(g: Geometry, m: MoeShapes, fused_qkv: bool, flex: bool) -> list[Term]:
    """What per-op SAC keeps of a MoE block (module docstring)."""
    return [
        *attention_op_sac_terms(g, fused_qkv, flex),
        Term("topk values fp32 (cached)", m.pairs, FP32),
        Term("topk indices int64 (cached)", m.pairs, INT64),
    ]


def working_terms(g: Geometry, m: MoeShapes, local_experts: int) -> list[Term]:
    """Gradients live at w1's grouped mm backward (module docstring); the experts'
    unsharded weight gradients only under FSDP2 (``local_experts``: the experts on this
    rank there, 0 elsewhere, where they are the persistent gradient rows)."""
    c, h, k, f = g.compute_bytes, g.hidden, m.pairs, m.expert_inter
    terms = [
        Term("layer output (residual) grad", h, g.residual_bytes, "seq"),
        Term("w3, w1 grouped mm input grads", k * h, c, count=2),
        Term("silu grad (w1 output grad)", k * f, c),
    ]
    if local_experts:
        n = local_experts * 3 * f * h
        terms.append(Term(f"experts' unsharded grads {local_experts} × 3·{f}·{h}", n, c, "const"))
    return terms


def block_terms(g: Geometry, arch: ArchitectureSpec, flex: bool) -> list[Term]:
    """A MoE block's saved set with no recompute: attention half, then the MoE block."""
    assert arch.moe is not None
    m = moe_shapes(arch.moe, g.tp)
    attention = tt.attention_terms(g, arch.qk_norm, flex)
    return [*attention, *moe_mlp_terms(g, m, arch.family in ROUTE_NORM_FAMILIES)]


def checkpoint_terms(
    g: Geometry, arch: ArchitectureSpec, fused_qkv: bool, flex: bool
) -> list[Term] | None:
    """Per-op SAC's kept set where every layer is a MoE one (None elsewhere: a stage's
    checkpointed layers share one kept set, which the dense rule stands for where dense
    layers mix in)."""
    moe = arch.moe
    if moe is None or moe.first_dense_layers or moe.layer_step != 1:
        return None
    return op_sac_terms(g, moe_shapes(moe, g.tp), fused_qkv, flex)


def working_at(plan: Plan) -> Callable[[Geometry, int], tuple[int, Formula, int]] | None:
    """A torchtitan MoE layer's working-set candidate for
    :func:`~engine.ledger.activations.working.working_at` at a micro-batch's geometry:
    (the gradients live at w1's grouped mm backward, less the saved tensors freed by
    then, plus ``own`` — the layer's own saved set where it is not recomputed, which the
    caller nets out —, its words, 0 freed left to net); None where the plan is not
    torchtitan's or has no MoE layers."""
    arch, par = plan.model.architecture, plan.parallelism
    if plan.runtime.activation_profile != "torchtitan" or arch.moe is None:
        return None
    moe = arch.moe
    fsdp2_ep = par.ep if family_of(par.strategy) == "fsdp2" else 0
    local = ceil_div(moe.num_experts, fsdp2_ep) if fsdp2_ep else 0

    def at(g: Geometry, own: int) -> tuple[int, Formula, int]:
        m = moe_shapes(moe, g.tp)
        live, gone = working_terms(g, m, local), freed_terms(g, m)
        gone_b = terms_bytes(gone, g)
        n = terms_bytes(live, g) - gone_b + own

        def words() -> str:
            return f"{terms_formula(live, g)} − its freed saved tensors {fmt_count(gone_b)}"

        return n, words, 0

    return at
