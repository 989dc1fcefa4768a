"""The micro-batch itself (``hbm.inputs.*``) and the model's small buffers
(``hbm.buffers.*``): held for the whole step."""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache, partial

from engine.ledger.activations.geometry import FP32, INT64, Geometry, shape_free_geometry
from engine.ledger.activations.hf import rotary_dim
from engine.ledger.activations.traits import source_of, traits_of
from engine.ledger.activations.varying import Fixed, Span, held_buffer, new_fixed
from engine.ledger.row import ALL_PHASES, Moment, Row, moments_in, span_row
from engine.ledger.shape_free import shape_free
from engine.models.spec import ArchitectureSpec
from engine.plan import Plan
from engine.units import fmt_count, round_up

_HELD = moments_in(ALL_PHASES)
"""The moments of a row held for the whole step (make_row's default)."""


def inputs_at(plan: Plan, last: bool) -> Callable[[Geometry], list[Fixed]]:
    """The input batch (and the labels on the last stage) and the rotary buffers, as
    :class:`Fixed` parts at a micro-batch's geometry: the plan
    read here, once (it is never read for the micro-batch's shape, which only ``g``
    gives); the buffers, which do not scale with it, built here too."""
    free = shape_free(plan)
    buffers = _buffers(
        free.model.architecture,
        free.runtime.activation_profile,
        shape_free_geometry(free),
        free.runtime.rope_cache != "torchtune",  # torchtune's RoPE has no inv_freq
    )
    if free.runtime.activation_profile == "megatron":
        return partial(_megatron_batch, last, buffers)
    label = "Input batch (input_ids" + (", labels)" if last else ")")
    n_in = 2 if last else 1

    def at(g: Geometry) -> list[Fixed]:
        gran = g.granularity
        n = g.micro_batch * g.seq * INT64
        batch = n_in * (-(-n // gran) * gran if gran > 1 else n)  # round_up inlined

        def words(span: Span, moments: frozenset[Moment]) -> Row:
            return span_row(
                id="hbm.inputs.batch",
                label=label,
                state="inputs",
                span=span,
                moments=moments,
                formula=lambda: f"{n_in} × int64 {g.micro_batch}·{g.seq}·8 = {fmt_count(batch)} B",
                source="hf-transformers-llama",
                kind="persistent",
            )

        return [new_fixed(((batch, batch), words, True, _HELD)), *buffers]

    return at


def _megatron_batch(last: bool, buffers: tuple[Fixed, ...], g: Geometry) -> list[Fixed]:
    """Megatron-LM's GPT batch on the GPU (``megatron/training/utils.py``
    ``get_batch_on_this_tp_rank``, called by ``pretrain_gpt.py`` ``get_batch``): ``tokens``
    and ``position_ids`` (int64, ``megatron/core/datasets/gpt_dataset.py``
    ``_get_ltor_masks_and_position_ids``: ``torch.arange(..., dtype=torch.long)``), and on
    the last stage ``labels`` (int64) and ``loss_mask`` (``torch.float``, 4 B), each
    ``.cuda()``'d. Not counted: the b × 1 × s × s bool ``attention_mask`` the dataset
    adds when ``create_attention_mask_in_dataloader`` is on (Megatron-LM's default; s² B,
    17 GB at s 131,072): the recipes turn it off (``--no-create-attention-mask-in-
    dataloader``), TE's causal fused attention never reads it, and ``memplan trace`` of
    Megatron-Core (``engine/trace/megatron``) feeds none."""
    gran, t = g.granularity, g.micro_batch * g.seq
    ints = (3 if last else 2) * round_up(t * INT64, gran)
    low = ints + (round_up(t * FP32, gran) if last else 0)
    what = "tokens, position_ids" + (", labels" if last else "")
    n = 3 if last else 2

    def words(span: Span, moments: frozenset[Moment]) -> Row:
        return span_row(
            id="hbm.inputs.batch",
            label="Input batch (" + what + (", loss_mask)" if last else ")"),
            state="inputs",
            span=span,
            moments=moments,
            formula=lambda: (
                f"int64 {what}: {n} × {g.micro_batch}·{g.seq}·8"
                + (f" + fp32 loss_mask {g.micro_batch}·{g.seq}·4" if last else "")
                + f" = {fmt_count(low)} B (no attention_mask: "
                "--no-create-attention-mask-in-dataloader)"
            ),
            source="megatron-gpt-batch",
            kind="persistent",
        )

    return [new_fixed(((low, low), words, True, _HELD)), *buffers]


@lru_cache(maxsize=256)
def _buffers(
    arch: ArchitectureSpec, profile: str, g: Geometry, hf_rotary: bool = True
) -> tuple[Fixed, ...]:
    """The rotary and embedding-scale buffers (none under the megatron profile), from
    exactly what they read (``g`` for its widths only: the buffers do not scale with
    tokens), so layouts differing elsewhere share them. ``hf_rotary`` False: the model
    code is torchtune's, whose RoPE buffers are ``hbm.buffers.rope_cache``
    (:mod:`~engine.ledger.activations.tune_rope`), not transformers' ``inv_freq``."""
    if profile != "hf-transformers":
        return ()
    gran = g.granularity
    parts: list[tuple[str, int]] = []
    if arch.position == "rotary" and hf_rotary:
        half = rotary_dim(arch, g) // 2
        inv = round_up(half * FP32, gran)
        parts.append((f"rotary inv_freq and original_inv_freq, 2 × fp32 {half}·4", 2 * inv))
    if traits_of(arch).embed_scale:
        parts.append(("the scaled embedding's 0-d embed_scale", gran))
    if not parts:
        return ()
    n = sum([b for _, b in parts])
    part = held_buffer(
        id="hbm.buffers.rotary",
        label="Module buffers (rotary inv_freq, embedding scale)",
        n=n,
        formula=lambda: (
            " + ".join(f"{k} {fmt_count(b)}" for k, b in parts)
            + f", each rounded to {gran} = {fmt_count(n)} B"
        ),
        source=source_of(arch),
    )
    return (part,)
