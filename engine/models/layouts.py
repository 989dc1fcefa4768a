"""Checkpoint layouts: how each family arranges and names its tensors.

The Hugging Face Llama layout (``model.layers.{i}``) serves every family but three; the
differences are switches in the spec (biases, q/k norms, sandwich norms, fused
projections, MoE, MLA, MTP) and where the norms sit, which follows the family's decoder
layer in transformers 5.24: before attention and MLP (Llama), also after both (Gemma 2/3
``sandwich_norm``), after both only (``Olmo2DecoderLayer``), or one norm shared by the
parallel attention and MLP (``CohereDecoderLayer``, StableLM with
``use_parallel_residual``). GPT-2, GPT-NeoX and Falcon keep their original names
(``classic_layouts``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from engine.models.attention import attention
from engine.models.classic_layouts import (
    falcon_head,
    falcon_layer,
    falcon_tail,
    gpt2_head,
    gpt2_layer,
    gpt2_tail,
    neox_head,
    neox_layer,
    neox_tail,
)
from engine.models.feedforward import feed_forward
from engine.models.mtp import mtp_modules
from engine.models.spec import ArchitectureSpec
from engine.models.tensor import Tensor, linear, norm


def _decoder_block(
    spec: ArchitectureSpec, p: str, index: int, layer: int | None
) -> Iterator[Tensor]:
    h, nb = spec.hidden, spec.norm_bias
    if spec.family == "olmo2":
        yield from attention(spec, f"{p}.self_attn", layer)
        yield from norm(f"{p}.post_attention_layernorm", h, nb, layer, "norm")
        yield from feed_forward(spec, p, index, layer)
        yield from norm(f"{p}.post_feedforward_layernorm", h, nb, layer, "norm")
        return
    yield from norm(f"{p}.input_layernorm", h, nb, layer, "norm")
    yield from attention(spec, f"{p}.self_attn", layer)
    if spec.residual == "sequential":
        yield from norm(f"{p}.post_attention_layernorm", h, nb, layer, "norm")
    if spec.sandwich_norm:
        # Gemma 2/3 normalise both before and after the MLP (and after attention).
        yield from norm(f"{p}.pre_feedforward_layernorm", h, nb, layer, "norm")
        yield from norm(f"{p}.post_feedforward_layernorm", h, nb, layer, "norm")
    yield from feed_forward(spec, p, index, layer)


def llama_head(spec: ArchitectureSpec) -> Iterator[Tensor]:
    """The Hugging Face ``LlamaForCausalLM``-style layout's tensor before its layers."""
    yield Tensor("model.embed_tokens.weight", (spec.vocab, spec.hidden), "embedding")


def llama_layer(spec: ArchitectureSpec, i: int) -> Iterator[Tensor]:
    """Decoder layer ``i`` of the Llama-style layout (``model.layers.{i}``)."""
    yield from _decoder_block(spec, f"model.layers.{i}", i, i)


def llama_tail(spec: ArchitectureSpec) -> Iterator[Tensor]:
    """The Llama-style layout's tensors after its layers: final norm, untied output
    layer, MTP modules."""
    yield from norm("model.norm", spec.hidden, spec.norm_bias, None, "final_norm")
    if not spec.tied_embeddings:
        yield from linear("lm_head", spec.vocab, spec.hidden, "lm_head", spec.lm_head_bias, None)
    yield from mtp_modules(spec, _decoder_block)


Part = Callable[[ArchitectureSpec], Iterator[Tensor]]
Layer = Callable[[ArchitectureSpec, int], Iterator[Tensor]]

_LAYOUTS: dict[str, tuple[Part, Layer, Part]] = {
    "gpt2": (gpt2_head, gpt2_layer, gpt2_tail),
    "gpt_neox": (neox_head, neox_layer, neox_tail),
    "falcon": (falcon_head, falcon_layer, falcon_tail),
}
_LLAMA = (llama_head, llama_layer, llama_tail)


def family_parts(spec: ArchitectureSpec) -> tuple[Part, Layer, Part]:
    """The family's layout in three parts: the tensors before the decoder layers, decoder
    layer ``i``'s, and those after. Apart so that the ledger can build one layer of each
    kind (:func:`layer_kind`) instead of every layer of a deep model."""
    return _LAYOUTS.get(spec.family, _LLAMA)


def family_layout(spec: ArchitectureSpec) -> Iterator[Tensor]:
    """Every tensor of ``spec`` in checkpoint order, by the family's layout."""
    head, layer, tail = family_parts(spec)
    yield from head(spec)
    for i in range(spec.layers):
        yield from layer(spec, i)
    yield from tail(spec)


def layer_kind(spec: ArchitectureSpec, i: int) -> bool | None:
    """What decoder layer ``i``'s tensors read of its index besides their names: whether
    its feed-forward block is an MoE block (:func:`engine.models.feedforward.feed_forward`,
    the one place a layer's index picks its tensors); None without MoE. Layers of one kind
    hold the same tensors under their own layer prefix."""
    return None if spec.moe is None else spec.moe.is_moe_layer(i)
