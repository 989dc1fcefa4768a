"""The backward working set of the layer whose backward runs at each moment.

While one decoder layer runs backward, the gradients it computes are live next to the
saved set it reads (recomputed first when checkpointed); the row is net of the layer's
own saved tensors, which the saved-activation rows count. ``backward.layers`` /
``backward.middle`` are the stage's last and middle layers (its largest kind stands for
them), ``backward.end`` its first layer (its own kind where a stage mixes dense and MoE
layers: DeepSeek's). A torchtitan MoE layer's is :mod:`~engine.ledger.activations.titan_moe`'s;
under torchtitan's chunked loss the layer's own pre-backward all-gather is one more
candidate (:mod:`~engine.ledger.peaks.titan_prefetch`).

A dense layer's working set is an estimate (the MLP intermediates' gradients and the
residual stream's incoming and outgoing gradients, banded). A transformers 5 MoE
layer's is the combine's backward, its first and largest (``integrations/moe.py``
``grouped_mm_experts_forward``, 5.24: ``weighted_out = proj_out *
sample_weights_g.unsqueeze(-1)`` — fp32 where the routing weights are —,
``weighted_out[inv_perm]``, ``.view(T, k, h).sum(dim=1)``, ``.to(hidden_states.dtype)``):
the ``.to`` backward's upcast gradient (T × h, only when promoted), the sum's expanded
gradient made contiguous (T·k × h), the index backward's zeroed T·k × h tensor and
``index_put`` result, and the layer's output gradient (traced: tests/fidelity_grid.py,
mixtral / qwen3_moe / qwen2_moe / granitemoe, FSDP2 + full recompute: the peak is "at
index_put" in layer 0's experts).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache
from operator import attrgetter
from typing import Literal, NamedTuple

from engine.ledger.activations import hf
from engine.ledger.activations import titan_moe as tm
from engine.ledger.activations.compiled import SOURCE as COMPILE_SOURCE
from engine.ledger.activations.compiled import per_layer_at
from engine.ledger.activations.geometry import (
    FP32,
    Geometry,
    Term,
    Trainability,
    at_shape,
    geometry,
    shape_free_geometry,
    terms_at,
    terms_bytes,
    trainability,
)
from engine.ledger.activations.geometry import terms_formula as formula
from engine.ledger.activations.hf_moe import MoeShapes, moe_shapes, routing_weight_bytes
from engine.ledger.activations.hf_moe import expert_terms as moe_expert_terms
from engine.ledger.activations.hf_moe import router_terms as moe_router_terms
from engine.ledger.activations.packing import band_of, packing_formula
from engine.ledger.activations.sdpa_kernel import attention_key, math_backward_terms
from engine.ledger.activations.stage_layers import LayerKind, StageLayers, layer_context
from engine.ledger.activations.traits import traits_of
from engine.ledger.activations.varying import Fixed, Span, new_fixed
from engine.ledger.peaks.titan_prefetch import own_gather_at
from engine.ledger.row import (
    BACKWARD,
    Formula,
    Moment,
    Row,
    moments_in,
    span_row,
    text,
)
from engine.ledger.shape_free import shape_free
from engine.models.spec import ArchitectureSpec
from engine.plan import Plan
from engine.stacks.families import family_of
from engine.units import ceil_div, fmt_count

NORM_BACKWARD_FP32 = 4
"""fp32 T × h tensors live at once in the composite RMSNorm's backward (``.to(float32)``,
``pow(2).mean(-1)``, ``* rsqrt(variance + eps)``, ``weight * .to(dtype)``): the upcast
gradient, the normalised input's and the pow / mean branch's two (traced: granitemoe /
qwen3_moe, FSDP2 + full recompute, at ``post_attention_layernorm``'s ``mul``)."""

_IDS: dict[Moment, tuple[str, str]] = {
    "backward.layers": ("hbm.activations.working.layer", "one"),
    "backward.middle": ("hbm.activations.working.middle_layer", "the middle"),
    "backward.end": ("hbm.activations.working.first_layer", "the first"),
}
"""A part's row id and words by its earliest moment; the moments in ``Ends``' order."""
_ENDS: tuple[Moment, ...] = tuple(_IDS)
_ALL_ENDS: frozenset[Moment] = frozenset(_ENDS)


@lru_cache(maxsize=256)
def working_at(plan: Plan) -> Callable[[Geometry, StageLayers], list[Fixed]]:
    """The backward working set — one part per (layer kind, checkpointed) of the layers
    whose backward runs at each moment: the largest kind's at the last and second-last
    layers' moments, the first layer's own at the end, each recomputed only where that
    layer is checkpointed (``StageLayers.ends``: under ``every_k`` torchtitan's
    ``(i + 1) % k == 0`` leaves the first layer whole) — as :class:`Fixed` parts at a
    micro-batch's geometry and its stage's layers counted there: the plan read here, once
    (never for the micro-batch's shape, which only ``g`` gives), the term lists looked up
    per local sequence. Cached on the plan: a pipeline's make-ups share it."""
    seq = geometry(plan).seq  # the local sequence: the micro-batch's size unread
    offload = plan.method.recompute.policy == "offload"
    combine = _moe_combine(plan, True)
    terms, size = _working_sizes(reads_of(shape_free(plan), seq, attention_key(plan)), combine)
    shared_after = traits_of(plan.model.architecture).shared_after_routed
    band, packing = band_of(plan), packing_formula(plan)
    fused = per_layer_at(plan)  # torch.compile: the recomputed saved set is the compiled one
    titan, own_gather = tm.working_at(plan), own_gather_at(plan)

    def part(
        g: Geometry, sl: StageLayers, kind: LayerKind, moments: frozenset[Moment], ckpt: bool
    ) -> Fixed:
        moe, mb = kind.moe and combine, g.micro_batch
        key: PerToken = "moe_work" if moe else "work"
        work = terms[key]
        work_b = size[key](mb)
        work_text: Formula = _words(work, g, "")
        recomputed = kind.bytes if (ckpt or offload) else 0
        own = sl.ckpt_bytes if ckpt else (0 if offload else kind.bytes)
        freed = 0  # the saved tensors already freed at the chosen moment (when recomputed)
        if moe:
            moe_saved = size["moe_saved"](mb)
            combine_freed = moe_saved - size["routed"](mb) if shared_after else 0
            after = terms["after_experts"]
            after_text = _words(after, g, " (after the MoE block's backward)")
            candidates = [
                (work_b, work_text, combine_freed),
                (size["after_experts"](mb), after_text, moe_saved),
            ]
        elif kind.moe and titan:  # torchtitan's MoE block (titan_moe.working_at)
            candidates = [titan(g, 0 if recomputed else kind.bytes)]
        else:
            candidates = [(work_b, work_text, 0)]
        removed = min(recomputed, fused(mb)) if fused and recomputed and not kind.moe else 0
        net = -1
        for b, words, fr in candidates:
            fr = fr if recomputed else 0
            n = max(0, b + recomputed - fr - own)
            if n > net:
                net, work_b, work_text, freed = n, b, words, fr
        lo, hi = band(max(0, net - removed))[0], band(net)[1]
        gather, gather_words = 0, ""
        if own_gather:  # the incoming residual grad is read only for this candidate
            grad = terms_bytes([Term("residual grad", g.hidden, g.residual_bytes, "seq")], g)
            gather, gather_words = own_gather(g.compute_bytes, grad)
            lo, hi = max(lo, gather), max(hi, gather)  # the larger moment of the backward

        def row(span: Span, live: frozenset[Moment]) -> Row:
            rid, which = _IDS[next(m for m in _ENDS if m in moments)]  # words: when shown
            which += " layer" if rid.endswith(".layer") else f" ({kind.name}) layer"
            return span_row(
                id=rid,
                label=f"Backward working set of {which}, net of its own freed tensors",
                state="activations",
                span=span,
                moments=live,
                formula=lambda: (
                    f"max(0, {text(work_text)} = {fmt_count(work_b)}"
                    + (f" + recomputed layer {fmt_count(recomputed)}" if recomputed else "")
                    + (f" − its MoE tensors already freed {fmt_count(freed)}" if freed else "")
                    + f" − the layer's own saved {fmt_count(own)}) = {fmt_count(net)} B; "
                    "× activation band"
                    + (f"; at least, {gather_words}" if gather else "")
                    + packing
                    + (
                        f"; torch.compile: low end without {fmt_count(removed)} B of the "
                        "recomputed layer's fused RMSNorm / SwiGLU intermediates "
                        f"[{COMPILE_SOURCE}]"
                        if removed
                        else ""
                    )
                ),
                source="hf-transformers-moe-combine" if moe else "memory-model",
                phases=BACKWARD,
            )

        return new_fixed(((lo, hi), row, True, moments_in(BACKWARD, moments)))

    def at(g: Geometry, sl: StageLayers) -> list[Fixed]:
        largest, first = max(sl.kinds, key=_BYTES), sl.kinds[0]
        end = largest if (first.moe, first.bytes) == (largest.moe, largest.bytes) else first
        if end is largest and sl.ends[0] == sl.ends[1] == sl.ends[2]:  # one part, every moment
            return [part(g, sl, largest, _ALL_ENDS, sl.ends[0])]
        groups: dict[tuple[int, bool], tuple[LayerKind, bool, set[Moment]]] = {}
        for m, kind, ckpt in zip(_ENDS, (largest, largest, end), sl.ends, strict=True):
            groups.setdefault((id(kind), ckpt), (kind, ckpt, set()))[2].add(m)
        return [part(g, sl, k, frozenset(ms), ck) for k, ck, ms in groups.values()]

    return at


def _words(terms: tuple[Term, ...], g: Geometry, tail: str) -> Formula:
    """A working set's terms in words, written when read."""
    return lambda: formula(list(terms), g) + tail


_BYTES = attrgetter("bytes")


def _moe_combine(plan: Plan, moe_layer: bool) -> bool:
    """Whether the layer's backward starts with transformers' grouped-mm combine."""
    hf_moe = plan.runtime.activation_profile == "hf-transformers"
    return moe_layer and hf_moe and plan.model.architecture.moe is not None


PerToken = Literal["work", "moe_work", "moe_saved", "routed", "after_experts"]  # _per_token's


class Reads(NamedTuple):
    """All the working set's term lists read of a shape-free plan (:func:`reads_of`):
    they are built from these fields alone, so layouts that differ elsewhere (DP, PP
    and its split, EP outside FSDP2, the strategy within a family) share them."""

    arch: ArchitectureSpec
    g: Geometry  # at one sequence of the local length
    tr: Trainability
    profile: str  # runtime.activation_profile
    attention: str
    policy: str  # method.recompute.policy
    fsdp2_ep: int  # the EP under FSDP2 (its unsharded expert grads are live), else 0


def reads_of(free: Plan, seq: int, attention: str | None = None) -> Reads:
    """:class:`Reads` of a shape-free plan at a local sequence of ``seq`` (``attention``:
    the plan's :func:`~engine.ledger.activations.sdpa_kernel.attention_key`, which reads
    the sequence the shape-free plan lacks; default its ``runtime.attention``)."""
    rt = free.runtime
    return Reads(
        free.model.architecture,
        at_shape(shape_free_geometry(free), 1, seq),
        trainability(free),
        rt.activation_profile,
        rt.attention if attention is None else attention,
        free.method.recompute.policy,
        _fsdp2_ep(free),
    )


def _per_token(free: Plan, seq: int, which: PerToken) -> tuple[Term, ...]:
    """A term list of the working set (a term is a width per token: none reads the
    micro-batch's size), built at one sequence of the local length and shared across
    micro-batch sizes (``tests/engine/ledger/activations/test_terms_per_sequence.py``
    checks them at other sizes): ``work`` / ``moe_work`` the dense / MoE layer's working
    set (``moe_work`` only with the combine: an MoE layer without it works as a dense
    one), ``moe_saved`` the MoE block's saved set, ``routed`` its router's and routed
    experts', ``after_experts`` the MoE layer's second moment."""
    return _per_token_of(reads_of(free, seq), which)


def _per_token_of(r: Reads, which: PerToken) -> tuple[Term, ...]:
    """:func:`_per_token` from exactly what it reads (:class:`Reads`)."""
    g, arch = r.g, r.arch
    if which == "work":
        return tuple(_dense_of(arch, r.profile, g, r.attention))
    if which == "moe_work":
        return tuple(_moe_working_of(arch, g, r.fsdp2_ep))
    if which == "after_experts":
        return tuple(_after_experts_of(arch, g, r.fsdp2_ep))
    if which == "moe_saved":
        return tuple(hf.moe_mlp_terms(layer_context(g, r.tr, arch, r.attention, r.policy)))
    assert arch.moe is not None
    m, t = moe_shapes(arch.moe, g.tp), traits_of(arch)
    return tuple(moe_router_terms(g, r.tr, t, m) + moe_expert_terms(g, r.tr, t, m))


_DENSE: tuple[PerToken, ...] = ("work",)
_READ_EP: tuple[PerToken, ...] = ("moe_work", "after_experts")  # FSDP2's expert grads
_COMBINE: tuple[PerToken, ...] = ("work", "moe_work", "moe_saved", "routed", "after_experts")


@lru_cache(maxsize=512)
def _working_sizes(
    r: Reads, combine: bool
) -> tuple[dict[PerToken, tuple[Term, ...]], dict[PerToken, Callable[[int], int]]]:
    """The term lists :func:`working_at` reads (the MoE ones only with the combine: an
    MoE layer without it works as a dense one) and their bytes as functions of the
    micro-batch's size (:func:`~engine.ledger.activations.geometry.terms_at`), once per
    :class:`Reads` and for every layout sharing them."""
    free_of_ep = r._replace(fsdp2_ep=0)  # for the lists that never read it
    terms = {
        w: _per_token_of(r if w in _READ_EP else free_of_ep, w)
        for w in (_COMBINE if combine else _DENSE)
    }
    return terms, {w: terms_at(t, r.g).bytes for w, t in terms.items()}


def after_experts_terms(plan: Plan, g: Geometry) -> list[Term]:
    """:func:`_after_experts_of` of ``plan``."""
    return _after_experts_of(plan.model.architecture, g, _fsdp2_ep(plan))


def _fsdp2_ep(plan: Plan) -> int:
    par = plan.parallelism
    return par.ep if family_of(par.strategy) == "fsdp2" else 0


def _after_experts_of(arch: ArchitectureSpec, g: Geometry, fsdp2_ep: int) -> list[Term]:
    """The MoE layer's second moment: its block's backward is done (its saved set freed,
    counted by the caller), the norm before it runs backward. Under FSDP2 the layer's
    experts' and router's unsharded weight gradients are live until its post-backward
    reduce-scatter (``FSDPParamGroup.post_backward``), which runs after the whole
    layer; elsewhere they are the persistent gradient rows."""
    assert arch.moe is not None
    m = moe_shapes(arch.moe, g.tp)
    h, c = g.hidden, g.compute_bytes
    terms = [
        Term("residual grads", h, g.residual_bytes, "seq", count=2),
    ]
    if traits_of(arch).norm == "layernorm":  # one fused native_layer_norm_backward
        terms.append(Term("LayerNorm backward input grad", h, c, "seq"))
    else:
        terms.append(
            Term("RMSNorm backward fp32 temporaries", h, FP32, "seq", count=NORM_BACKWARD_FP32)
        )
    return terms + _expert_grads(fsdp2_ep, g, m, routed=True)


def _expert_grads(fsdp2_ep: int, g: Geometry, m: MoeShapes, routed: bool) -> list[Term]:
    """Under FSDP2, the layer's unsharded weight gradients its MoE backward has made so
    far (live until ``FSDPParamGroup.post_backward`` reduce-scatters the whole layer):
    the shared experts' and — once the routed experts' backward is done — theirs and the
    router's (``fsdp2_ep``: the EP under FSDP2, 0 elsewhere, where they are the
    persistent gradient rows)."""
    if not fsdp2_ep:
        return []
    h, c = g.hidden, g.compute_bytes
    terms: list[Term] = []
    if routed:
        local = ceil_div(m.experts, fsdp2_ep)
        terms += [
            Term(
                f"routed experts' unsharded grads {local} × 3·{m.expert_inter}·{h}",
                local * 3 * m.expert_inter * h,
                c,
                "const",
            ),
            Term(f"router unsharded grad {m.experts}·{h}", m.experts * h, c, "const"),
        ]
    if m.shared_inter:
        terms.append(
            Term(
                f"shared experts' unsharded grads 3·{m.shared_inter}·{h}",
                3 * m.shared_inter * h,
                c,
                "const",
            )
        )
    return terms


def moe_working_terms(plan: Plan, g: Geometry) -> list[Term]:
    """The combine's backward in a transformers 5 MoE layer (module docstring)."""
    return _moe_working_of(plan.model.architecture, g, _fsdp2_ep(plan))


def _moe_working_of(arch: ArchitectureSpec, g: Geometry, fsdp2_ep: int) -> list[Term]:
    assert arch.moe is not None
    m = moe_shapes(arch.moe, g.tp)
    c = g.compute_bytes
    p = max(c, routing_weight_bytes(g, traits_of(arch)))
    pairs_h = m.pairs * g.hidden
    shared_first = traits_of(arch).shared_after_routed and m.shared_inter > 0
    terms = [Term("layer output (residual) grad", g.hidden, g.residual_bytes, "seq")]
    if p > c and not shared_first:
        # the combine's backward is the layer's first: the recompute it triggers runs
        # while it holds the upcast gradient (freed before index_put otherwise)
        terms.append(Term(f"combine .to() backward upcast to {p} B", g.hidden, p))
    terms += [
        Term("combine sum backward, expanded grad made contiguous", pairs_h, p),
        Term("combine index backward: zeros + index_put", pairs_h, p, count=2),
    ]
    if shared_first:
        terms += _expert_grads(fsdp2_ep, g, m, routed=False)
    return terms


def _dense_terms(plan: Plan, g: Geometry) -> list[Term]:
    """:func:`_dense_of` of ``plan``."""
    rt = plan.runtime
    return _dense_of(plan.model.architecture, rt.activation_profile, g, rt.attention)


def _dense_of(arch: ArchitectureSpec, profile: str, g: Geometry, attention: str) -> list[Term]:
    """Gradients in flight while one layer runs backward: the MLP intermediates' grads
    and the residual stream's incoming and outgoing grads (an estimate, banded).

    Gemma's norms (transformers 5.24 ``Gemma2RMSNorm`` / ``Gemma3RMSNorm.forward``:
    ``self._norm(x.float()) * (1.0 + self.weight.float())``, then ``type_as(x)``) run
    their backward in fp32: the incoming 16-bit gradient is upcast by the ``type_as``
    backward and multiplied by ``(1 + w)`` in fp32 while the recomputed layer's saved set
    is live, one more fp32 hidden-sized tensor than a 16-bit norm's backward holds
    (traced: tests/fidelity_grid.py, gemma2 / gemma3 full recompute)."""
    terms = [
        Term("grads of MLP intermediates", g.inter_local, g.compute_bytes, count=3),
        Term("residual grads", g.hidden, g.residual_bytes, "seq", count=2),
    ]
    if profile == "hf-transformers" and traits_of(arch).norm == "rms_gemma":
        terms.append(Term("Gemma fp32 (1 + w) norm backward gradient", g.hidden, 4, "seq"))
    math = math_backward_terms(attention, arch, g) if profile == "hf-transformers" else []
    if math and terms_bytes(math, g) > terms_bytes(terms, g):  # the attention's backward
        return math
    return terms
