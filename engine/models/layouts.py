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

from collections.abc import Iterator

from engine.models.attention import attention
from engine.models.classic_layouts import falcon_layout, gpt2_layout, neox_layout
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


def llama_layout(spec: ArchitectureSpec) -> Iterator[Tensor]:
    """The Hugging Face ``LlamaForCausalLM``-style layout and its relatives."""
    yield Tensor("model.embed_tokens.weight", (spec.vocab, spec.hidden), "embedding")
    for i in range(spec.layers):
        yield from _decoder_block(spec, f"model.layers.{i}", i, i)
    yield from norm("model.norm", spec.hidden, spec.norm_bias, None, "final_norm")
    if not spec.tied_embeddings:
        yield from linear("lm_head", spec.vocab, spec.hidden, "lm_head", spec.lm_head_bias, None)
    yield from mtp_modules(spec, _decoder_block)


def family_layout(spec: ArchitectureSpec) -> Iterator[Tensor]:
    """Every tensor of ``spec`` in checkpoint order, by the family's layout."""
    if spec.family == "gpt2":
        yield from gpt2_layout(spec)
    elif spec.family == "gpt_neox":
        yield from neox_layout(spec)
    elif spec.family == "falcon":
        yield from falcon_layout(spec)
    else:
        yield from llama_layout(spec)
