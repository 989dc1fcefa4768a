"""Activation rows of one pipeline stage (``hbm.activations.*``, ``host.activations.*``):
saved tensors, recompute, the backward working set.

The implementation profile (``plan.runtime.activation_profile``) lists what one layer
saves per micro-batch; this module multiplies by the stage's layers under the recompute
policy and by the micro-batches the pipeline schedule keeps in flight
(:mod:`engine.ledger.activations.schedule`), and adds the once-per-forward tensors
(rotary tables, final norm, labels). Work is O(1) per stage: one layer is counted and
multiplied, never looped over tokens or layers. The batch itself is in
:mod:`~engine.ledger.activations.inputs`, the loss's tensors in
:mod:`~engine.ledger.activations.loss`.
"""

from __future__ import annotations

from collections.abc import Iterable

from engine.ledger.activations import hf
from engine.ledger.activations import megatron as mg
from engine.ledger.activations.geometry import (
    INT64,
    Geometry,
    Term,
    Trainability,
    geometry,
    terms_bytes,
    terms_formula,
    trainability,
)
from engine.ledger.activations.inputs import input_rows
from engine.ledger.activations.loss import labels_rows
from engine.ledger.activations.packing import packing_formula, real_token_share
from engine.ledger.activations.schedule import in_flight
from engine.ledger.placement import LocalTensor
from engine.ledger.row import (
    BACKWARD,
    FORWARD,
    FORWARD_BACKWARD,
    IN_LAYERS,
    UNTIL_LAYERS_FREE,
    Row,
    make_row,
)
from engine.ledger.states.quantized import is_quantized
from engine.plan import Plan
from engine.units import fmt_count, round_up

SCALAR_ALLOCS = 2
"""The loss and nll_loss's total_weight: two 0-d tensors, one 512-B block each."""

LINEAR_ROLES = frozenset({"q", "k", "v", "qkv", "o", "gate", "up", "gate_up", "down", "lm_head"})


def _layer_terms(
    plan: Plan, g: Geometry, tr: Trainability, input_needs_grad: bool, selective: bool
) -> list[Term]:
    arch, rt = plan.model.architecture, plan.runtime
    mlp = "gelu" if arch.mlp == "gelu" else "swiglu"
    if rt.activation_profile == "megatron":
        return mg.layer_terms(
            g,
            mlp=mlp,
            attention=rt.attention,
            selective=selective,
            dropout=arch.family in mg.DROPOUT_FAMILIES,
        )
    return hf.layer_terms(
        g,
        tr,
        mlp=mlp,
        attention=rt.attention,
        selective=selective,
        input_needs_grad=input_needs_grad,
    )


def _moe_note(plan: Plan) -> str:
    """Say where MoE layers were approximated: dense first layers counted as MoE ones."""
    moe = plan.model.architecture.moe
    if moe is None or not moe.first_dense_layers:
        return ""
    return f" (the {moe.first_dense_layers} dense first layers are counted like the MoE layers)"


def _ckpt_terms(plan: Plan, g: Geometry) -> list[Term]:

    if plan.runtime.activation_profile == "megatron":
        return mg.checkpoint_input_terms(g)
    return hf.checkpoint_input_terms(g)


def _band(plan: Plan, n: int) -> tuple[int, int]:
    """The activation band's low–high of ``n`` bytes; packing lowers the low end."""
    b = plan.runtime.activation_band
    return int(n * b.low * real_token_share(plan)), int(n * b.high)


def _weight_casts(
    placed: Iterable[LocalTensor], c: int, gran: int, qlora: bool, tied: bool
) -> tuple[int, int]:
    """Autocast's 16-bit copies of linear weights, each kept by its matmul for backward.

    A 4-bit (QLoRA) linear has none: bitsandbytes' ``MatMul4Bit`` saves only the packed
    weight, which is resident anyway, and dequantizes it again in backward
    (bitsandbytes/autograd/_functions.py). Returns (bytes per decoder layer summed over
    the stage, lm_head bytes).
    """
    layers, head = 0, 0
    for t in placed:
        if t.tensor.kind != "weight" or (qlora and is_quantized(t.tensor)):
            continue
        n = round_up(t.numel * c, gran) * t.count
        if t.tensor.role in LINEAR_ROLES and t.tensor.layer is not None:
            layers += n
        elif t.tensor.role == "lm_head" or (tied and t.tensor.role == "embedding"):
            head += n  # the lookup itself casts nothing; a tied head multiplies by it
    return layers, head


def activation_rows(
    plan: Plan, stage: int, n_layers: int, placed: tuple[LocalTensor, ...]
) -> list[Row]:
    """Saved activations, the backward working set and once-per-forward tensors."""
    g, tr = geometry(plan), trainability(plan)
    rec = plan.method.recompute
    par = plan.parallelism
    first, last = stage == 0, stage == par.pp - 1
    fly = in_flight(plan, stage)
    policy = rec.policy
    selective = policy == "selective"
    full = _layer_terms(plan, g, tr, True, selective)
    full_b = terms_bytes(full, g)
    first_b = full_b
    if first and not tr.embedding:
        first_b = terms_bytes(_layer_terms(plan, g, tr, False, selective), g)
    ckpt = _ckpt_terms(plan, g)
    ckpt_b = terms_bytes(ckpt, g)
    n_ckpt = {"full": n_layers, "every_k": n_layers // rec.every_k}.get(policy, 0)
    n_plain = n_layers - n_ckpt
    gran = g.granularity

    rows: list[Row] = []
    if policy == "offload":
        gpu_low, gpu_high = full_b, 2 * full_b
        saved_one = first_b + (n_layers - 1) * full_b if n_layers else 0
        host = fly.times(saved_one)
        rows.append(
            make_row(
                id="host.activations.offloaded",
                label="Activations offloaded to host",
                state="activations",
                location="host",
                kind="peak",
                group="activations",
                low=host,
                high=host,
                formula=f"{n_layers} layers × {fmt_count(full_b)} B × {fly.num}/{fly.den} "
                f"in flight = {fmt_count(host)} B (pinned host buffers)",
                source="torch-activation-offload",
                phases=FORWARD_BACKWARD,
            )
        )
        layer_total_low, layer_total_high = gpu_low, gpu_high
        layer_formula = (
            f"offload: the layer being copied out and the next one, 1–2 × {fmt_count(full_b)} B"
        )
    else:
        plain_first = first_b if (first and n_plain == n_layers and n_layers) else full_b
        plain = (plain_first + (n_plain - 1) * full_b) if n_plain else 0
        one = plain + n_ckpt * ckpt_b
        total = fly.times(one)
        layer_total_low, layer_total_high = _band(plan, total)
        layer_formula = (
            f"per layer {terms_formula(full, g)} = {fmt_count(full_b)} B"
            + (
                f" (first layer {fmt_count(first_b)} B: frozen embedding)"
                if first_b != full_b and n_plain == n_layers
                else ""
            )
            + f"; {n_plain} layers saved"
            + (
                f" + {n_ckpt} checkpointed × {fmt_count(ckpt_b)} B ({terms_formula(ckpt, g)})"
                if n_ckpt
                else ""
            )
            + f" = {fmt_count(one)} B; × {fly.num}/{fly.den} in flight ({fly.why}) = "
            f"{fmt_count(total)} B; × activation band" + packing_formula(plan) + _moe_note(plan)
        )
    rows.append(
        make_row(
            id="hbm.activations.saved.layers",
            state="activations",
            label=f"Saved activations, {n_layers} decoder layers "
            f"({plan.runtime.activation_profile})",
            location="hbm",
            kind="peak",
            group="activations",
            low=layer_total_low,
            high=layer_total_high,
            formula=layer_formula,
            source=_profile_source(plan),
            phases=FORWARD_BACKWARD,
            backward=UNTIL_LAYERS_FREE,
            dtype=plan.method.precision.compute_dtype,
        )
    )
    if g.autocast and (n_plain or last):  # the head is outside every checkpoint
        per_layers, head = _weight_casts(
            placed,
            g.compute_bytes,
            gran,
            plan.method.kind == "qlora",
            plan.model.architecture.tied_embeddings,
        )
        per_layer = per_layers // max(n_layers, 1)
        casts = fly.times(per_layer * n_plain + (head if last else 0))
        rows.append(
            make_row(
                id="hbm.activations.saved.weight_casts",
                state="activations",
                label="Autocast 16-bit weight copies kept for backward",
                location="hbm",
                kind="peak",
                group="activations",
                low=casts,
                high=casts,
                formula=f"{n_plain} layers × {fmt_count(per_layer)} B"
                + (f" + lm_head {fmt_count(head)} B" if last else "")
                + f", × {fly.num}/{fly.den} in flight = {fmt_count(casts)} B",
                source="torch-autocast",
                phases=FORWARD_BACKWARD,
                backward=UNTIL_LAYERS_FREE,
                dtype=plan.method.precision.compute_dtype,
            )
        )
    other = _other_terms(plan, g, tr, first, last, n_ckpt > 0)
    other_b = sum(b for _, b in other)
    if other_b:
        n = fly.whole * other_b
        rows.append(
            make_row(
                id="hbm.activations.saved.other",
                state="activations",
                label="Saved once per forward (rotary, final norm, labels)",
                location="hbm",
                kind="peak",
                group="activations",
                low=n,
                high=n,
                formula=" + ".join(f"{k} {fmt_count(b)}" for k, b in other)
                + f" = {fmt_count(other_b)} B × {fly.whole} in flight",
                source=_profile_source(plan),
                phases=FORWARD_BACKWARD,
                backward=UNTIL_LAYERS_FREE,
            )
        )
    work = _working_terms(g)
    work_b = terms_bytes(work, g)
    recomputed = full_b if (n_ckpt or policy == "offload") else 0
    own = ckpt_b if n_ckpt else (0 if policy == "offload" else full_b)
    net = max(0, work_b + recomputed - own)
    lo, hi = _band(plan, net)
    rows.append(
        make_row(
            id="hbm.activations.working.layer",
            state="activations",
            label="Backward working set of one layer, net of its own freed tensors",
            location="hbm",
            kind="peak",
            group="activations",
            low=lo,
            high=hi,
            formula=f"max(0, {terms_formula(work, g)} = {fmt_count(work_b)}"
            + (f" + recomputed layer {fmt_count(recomputed)}" if recomputed else "")
            + f" − the layer's own saved {fmt_count(own)}) = {fmt_count(net)} B; "
            "× activation band" + packing_formula(plan),
            source="memory-model",
            phases=BACKWARD,
            backward=IN_LAYERS,
        )
    )
    rows += input_rows(plan, g, last)
    rows += labels_rows(plan, g, last, fly)
    if plan.runtime.attention == "eager":
        mask = round_up(g.micro_batch * g.seq * g.seq * g.compute_bytes, gran)
        rows.append(
            make_row(
                id="hbm.activations.forward.mask",
                state="activations",
                label="Eager attention causal mask (b × 1 × s × s)",
                location="hbm",
                kind="peak",
                group="activations",
                low=mask,
                high=mask,
                formula=f"{g.micro_batch}·{g.seq}·{g.seq}·{g.compute_bytes} = {fmt_count(mask)} B",
                source="hf-transformers-llama",
                phases=FORWARD,
            )
        )
    return rows


def _profile_source(plan: Plan) -> str:
    if plan.runtime.activation_profile == "megatron":
        return "korthikanti-2022"
    return "hf-transformers-llama"


def _working_terms(g: Geometry) -> list[Term]:
    """Gradients in flight while one layer runs backward: the MLP intermediates' grads
    and the residual stream's incoming and outgoing grads (an estimate, banded)."""
    return [
        Term("grads of MLP intermediates", g.inter_local, g.compute_bytes, count=3),
        Term("residual grads", g.hidden, g.residual_bytes, "seq", count=2),
    ]


def _other_terms(
    plan: Plan, g: Geometry, tr: Trainability, first: bool, last: bool, ckpt: bool
) -> list[tuple[str, int]]:
    """Tensors saved once per micro-batch, outside the decoder layers."""
    arch, gran = plan.model.architecture, g.granularity
    out: list[tuple[str, int]] = []
    hf_profile = plan.runtime.activation_profile == "hf-transformers"
    if hf_profile and arch.position == "rotary":
        cs = round_up(g.seq * g.head_dim * g.embed_bytes, gran)
        out.append((f"rotary cos, sin 2 × 1·{g.seq}·{g.head_dim}·{g.embed_bytes}", 2 * cs))
    if hf_profile and ckpt:
        out.append((f"position_ids kept by checkpoint 1·{g.seq}·8", round_up(g.seq * INT64, gran)))
    if last:
        fin = hf.final_norm_terms(g, tr) if hf_profile else mg.final_terms(g)
        out.append((f"final norm ({terms_formula(fin, g)})", terms_bytes(fin, g)))
        out.append((f"loss scalars {SCALAR_ALLOCS} × {gran}", SCALAR_ALLOCS * gran))
    return out
