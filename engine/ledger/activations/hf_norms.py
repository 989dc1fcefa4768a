"""What a norm saves for backward, by the kind its family implements (transformers 5.24).

Per kind, with the input needing a gradient (``ing``) and the weight trained (``wt``):

- ``rms`` (``LlamaRMSNorm.forward``): ``x.to(fp32)``; ``pow`` and the ``rsqrt``
  multiply keep the fp32 input and the per-row rsqrt (``ing``); ``weight * x̂.to(dtype)``
  keeps the 16-bit normalised tensor (``wt``).
- ``rms_fp32_product`` (``Olmo2RMSNorm``): the same, but ``(weight * x̂).to(dtype)``
  multiplies in fp32, so the normalised tensor kept is fp32.
- ``rms_gemma`` (``Gemma2RMSNorm`` / ``Gemma3RMSNorm``): ``x̂ * (1 + w.float())`` in fp32:
  the fp32 normalised tensor (``wt``) and the fp32 ``1 + w`` (``ing``, one per norm).
- ``layernorm`` (``nn.LayerNorm`` → ``native_layer_norm``): the input itself and a
  per-row mean and rstd (fp32 on CUDA: the accumulate type), whenever either needs a
  gradient; a second norm of the same input (GPT-NeoX's parallel branches) shares it.
- ``layernorm_fp32`` (``CohereLayerNorm``): ``x - mean`` is computed twice in fp32 and
  both are kept (by ``pow`` and by the ``rsqrt`` multiply), with the rsqrt (``ing``);
  ``weight.to(fp32) * x̂`` keeps the fp32 normalised tensor (``wt``) and, for a 16-bit
  weight, its fp32 copy (``ing``).

The norm's output is kept by each linear that reads it and is trained (one tensor; one
16-bit cast per linear under autocast) and by the LoRA adapters on those linears.
"""

from __future__ import annotations

from dataclasses import dataclass

from engine.ledger.activations.geometry import FP32, Geometry, Term, TokenAxis, Trainability
from engine.ledger.activations.litgpt_lora import a_out_width, zero_pad_terms
from engine.ledger.activations.traits import NormKind


@dataclass(frozen=True, slots=True)
class NormSite:
    """One norm in a layer: what it normalises and who reads it."""

    label: str
    kind: NormKind
    width: int  # elements per token (h; heads·d for a q/k norm)
    in_bytes: int  # the input's element size
    input_needs_grad: bool = True
    groups: int = 1  # rows per token normalised separately (one per head)
    axis: TokenAxis = "seq"
    input_shared: bool = False  # a LayerNorm of an input another norm already keeps
    separate_groups: bool = False  # one LayerNorm module per head (StableLM)
    weight_width: int = 0  # elements of the weight (0: width ÷ groups, a shared weight)


def norm_saved(g: Geometry, tr: Trainability, site: NormSite, param_fp32: bool) -> list[Term]:
    """The norm's own saved tensors (not its output)."""
    ing, wt = site.input_needs_grad, tr.norms
    w, n, ax, lab = site.width, site.groups, site.axis, site.label
    weight = site.weight_width or w // n
    terms: list[Term] = []
    kind = site.kind
    if kind == "layernorm":
        if not (ing or wt):
            return []
        if not site.input_shared:
            terms.append(Term(f"{lab} input", w, site.in_bytes, ax))
        if site.separate_groups:
            terms.append(Term(f"{lab} mean, rstd per head fp32", 1, FP32, ax, count=2 * n))
        else:
            terms.append(Term(f"{lab} mean, rstd fp32", n, FP32, ax, count=2))
        return terms
    if kind == "layernorm_fp32":
        if ing:
            terms.append(Term(f"{lab} fp32 centred input (twice)", w, FP32, ax, count=2))
            terms.append(Term(f"{lab} rsqrt", n, FP32, ax))
            if not param_fp32:
                terms.append(Term(f"{lab} fp32 weight copy", site.weight_width or w, FP32, "const"))
        if wt:
            terms.append(Term(f"{lab} fp32 normalised", w, FP32, ax))
        return terms
    if ing:
        terms.append(Term(f"{lab} fp32 input", w, FP32, ax))
        terms.append(Term(f"{lab} rsqrt", n, FP32, ax))
        if kind == "rms_gemma":
            terms.append(Term(f"{lab} fp32 1 + w", weight, FP32, "const"))
    if wt:
        bpe = site.in_bytes if kind == "rms" else FP32
        terms.append(Term(f"{lab} normalised", w, bpe, ax))
    return terms


def l2_norm_saved(site: NormSite) -> list[Term]:
    """Llama-4's weightless ``Llama4TextL2Norm``: ``x.float()`` and its rsqrt."""
    return [
        Term(f"{site.label} fp32 input", site.width, FP32, site.axis),
        Term(f"{site.label} rsqrt", site.groups, FP32, site.axis),
    ]


def shares_input(tr: Trainability, role: str, in_bytes: int) -> bool:
    """Whether the adapter on ``role`` keeps the very input tensor (no dtype cast, no
    dropout), so that tensor is kept even when the base linear is frozen."""
    return role in tr.adapter_roles and tr.adapter_bytes == in_bytes and not tr.adapter_dropout


def input_kept(g: Geometry, tr: Trainability, roles: tuple[str, ...], in_bytes: int) -> bool:
    """Whether some linear (or an adapter sharing its input) keeps an input tensor."""
    if any(r in tr.linear_roles or r in tr.kept_inputs for r in roles):
        return True
    return not g.autocast and any(shares_input(tr, r, in_bytes) for r in roles)


def consumer_terms(
    g: Geometry, tr: Trainability, label: str, width: int, consumers: tuple[str, ...]
) -> list[Term]:
    """The norm output kept by the trained linears (and adapters) that read it."""
    terms: list[Term] = []
    out_bytes = FP32 if g.autocast else g.compute_bytes
    trained = [c for c in consumers if c in tr.linear_roles]
    if g.autocast:
        if trained:
            terms.append(
                Term(
                    f"{label} out, 16-bit cast per linear",
                    width,
                    g.compute_bytes,
                    count=len(trained),
                )
            )
    elif input_kept(g, tr, consumers, out_bytes):
        terms.append(Term(f"{label} out", width, out_bytes))
    terms += adapter_terms(g, tr, label, [(c, width) for c in consumers], out_bytes)
    return terms


def adapter_terms(
    g: Geometry, tr: Trainability, label: str, inputs: list[tuple[str, int]], in_bytes: int
) -> list[Term]:
    """LoRA adapters on linears reading an input of ``width`` elements in ``in_bytes``:
    PEFT casts the input to the adapter dtype (one copy per adapter unless it already is
    that dtype and no dropout runs), dropout keeps its mask, B keeps A's output."""
    terms: list[Term] = []
    for role, width in inputs:
        if role not in tr.adapter_roles:
            continue
        if g.autocast:
            terms.append(Term(f"lora {role} input cast", width, g.compute_bytes))
            a_bytes = g.compute_bytes
        else:
            if not shares_input(tr, role, in_bytes):
                terms.append(Term(f"lora {role} input ({label})", width, tr.adapter_bytes))
            a_bytes = tr.adapter_bytes
        if tr.adapter_dropout:
            terms.append(Term(f"lora {role} dropout mask", width, 1))
        terms.append(Term(f"lora {role} A out", a_out_width(tr, role), a_bytes))
        terms += zero_pad_terms(g, tr, role, a_bytes)
    return terms
