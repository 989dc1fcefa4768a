"""Layouts that keep their original, non-Llama checkpoint names: GPT-2, GPT-NeoX, Falcon.

Each follows its transformers 5.24 modeling file (``GPT2LMHeadModel``,
``GPTNeoXForCausalLM``, ``FalconForCausalLM``); only the tensors' names and the norms'
placement differ from the Llama layout, the shapes come from the same spec switches.
"""

from __future__ import annotations

from collections.abc import Iterator

from engine.models.attention import gqa_attention
from engine.models.spec import ArchitectureSpec
from engine.models.tensor import Tensor, linear, norm


def gpt2_head(spec: ArchitectureSpec) -> Iterator[Tensor]:
    """GPT-2's tensors before its layers (embeddings).

    GPT-2: learned positions, LayerNorm with bias, fused ``c_attn``, ``Conv1D`` weights.

    Names follow the ``gpt2`` checkpoint (saved from ``GPT2Model``, so no ``transformer.``
    prefix). ``Conv1D`` stores weights as ``(in, out)``: marked ``stored_transposed``.
    The causal-mask buffers ``h.{i}.attn.bias`` that some GPT-2 files carry are not
    parameters and are not listed.
    """
    yield Tensor("wte.weight", (spec.vocab, spec.hidden), "embedding")
    if spec.position == "learned":
        yield Tensor("wpe.weight", (spec.max_position, spec.hidden), "position_embedding")


def gpt2_layer(spec: ArchitectureSpec, i: int) -> Iterator[Tensor]:
    """GPT-2's decoder layer ``i`` (``h.{i}``)."""
    h, nb, p = spec.hidden, spec.norm_bias, f"h.{i}"
    yield from norm(f"{p}.ln_1", h, nb, i, "norm")
    yield from gqa_attention(
        spec, f"{p}.attn", i, qkv_name="c_attn", o_name="c_proj", transposed=True
    )
    yield from norm(f"{p}.ln_2", h, nb, i, "norm")
    yield from linear(
        f"{p}.mlp.c_fc", spec.intermediate, h, "up", spec.mlp_bias, i, transposed=True
    )
    yield from linear(
        f"{p}.mlp.c_proj", h, spec.intermediate, "down", spec.mlp_bias, i, transposed=True
    )


def gpt2_tail(spec: ArchitectureSpec) -> Iterator[Tensor]:
    """GPT-2's tensors after its layers: final norm and (untied) output layer."""
    yield from norm("ln_f", spec.hidden, spec.norm_bias, None, "final_norm")
    if not spec.tied_embeddings:
        yield from linear("lm_head", spec.vocab, spec.hidden, "lm_head", spec.lm_head_bias, None)


def neox_head(spec: ArchitectureSpec) -> Iterator[Tensor]:
    """GPT-NeoX's tensors before its layers (embeddings).

    GPT-NeoX / Pythia: fused ``query_key_value`` with bias, LayerNorm, untied ``embed_out``.

    Both residual layouts keep two norms per layer (``use_parallel_residual`` changes the
    computation, not the parameters).
    """
    h = spec.hidden
    yield Tensor("gpt_neox.embed_in.weight", (spec.vocab, h), "embedding")
    if spec.position == "learned":
        yield Tensor("gpt_neox.embed_pos.weight", (spec.max_position, h), "position_embedding")


def neox_layer(spec: ArchitectureSpec, i: int) -> Iterator[Tensor]:
    """GPT-NeoX's decoder layer ``i`` (``gpt_neox.layers.{i}``)."""
    h, nb, p = spec.hidden, spec.norm_bias, f"gpt_neox.layers.{i}"
    yield from norm(f"{p}.input_layernorm", h, nb, i, "norm")
    yield from norm(f"{p}.post_attention_layernorm", h, nb, i, "norm")
    yield from gqa_attention(spec, f"{p}.attention", i, qkv_name="query_key_value", o_name="dense")
    yield from linear(f"{p}.mlp.dense_h_to_4h", spec.intermediate, h, "up", spec.mlp_bias, i)
    yield from linear(f"{p}.mlp.dense_4h_to_h", h, spec.intermediate, "down", spec.mlp_bias, i)


def neox_tail(spec: ArchitectureSpec) -> Iterator[Tensor]:
    """GPT-NeoX's tensors after its layers: final norm and (untied) ``embed_out``."""
    h = spec.hidden
    yield from norm("gpt_neox.final_layer_norm", h, spec.norm_bias, None, "final_norm")
    if not spec.tied_embeddings:
        yield from linear("embed_out", spec.vocab, h, "lm_head", spec.lm_head_bias, None)


def _falcon_norms(spec: ArchitectureSpec, p: str, i: int) -> Iterator[Tensor]:
    """``FalconDecoderLayer``'s norms: two when sequential (``parallel_attn`` false), one
    shared (``input_layernorm``), or one per branch (``ln_attn``, ``ln_mlp``: the new
    decoder architecture with ``num_ln_in_parallel_attn`` 2, its default)."""
    h, nb = spec.hidden, spec.norm_bias
    if spec.residual == "parallel_two_norms":
        yield from norm(f"{p}.ln_attn", h, nb, i, "norm")
        yield from norm(f"{p}.ln_mlp", h, nb, i, "norm")
        return
    yield from norm(f"{p}.input_layernorm", h, nb, i, "norm")
    if spec.residual == "sequential":
        yield from norm(f"{p}.post_attention_layernorm", h, nb, i, "norm")


def falcon_head(spec: ArchitectureSpec) -> Iterator[Tensor]:
    """Falcon's tensor before its layers (the word embeddings).

    Falcon: fused ``query_key_value`` of (heads + 2·kv_heads)·d rows, GELU MLP, LayerNorm.

    Multi-query Falcon-7B has one kv head (``h + 2d`` rows), the new decoder architecture
    ``num_kv_heads`` of them; ``bias`` applies to every projection, never to ``lm_head``.
    """
    yield Tensor("transformer.word_embeddings.weight", (spec.vocab, spec.hidden), "embedding")


def falcon_layer(spec: ArchitectureSpec, i: int) -> Iterator[Tensor]:
    """Falcon's decoder layer ``i`` (``transformer.h.{i}``)."""
    h, b, p = spec.hidden, spec.mlp_bias, f"transformer.h.{i}"
    yield from gqa_attention(
        spec, f"{p}.self_attention", i, qkv_name="query_key_value", o_name="dense"
    )
    yield from linear(f"{p}.mlp.dense_h_to_4h", spec.intermediate, h, "up", b, i)
    yield from linear(f"{p}.mlp.dense_4h_to_h", h, spec.intermediate, "down", b, i)
    yield from _falcon_norms(spec, p, i)


def falcon_tail(spec: ArchitectureSpec) -> Iterator[Tensor]:
    """Falcon's tensors after its layers: final norm and (untied) output layer."""
    yield from norm("transformer.ln_f", spec.hidden, spec.norm_bias, None, "final_norm")
    if not spec.tied_embeddings:
        yield from linear("lm_head", spec.vocab, spec.hidden, "lm_head", spec.lm_head_bias, None)
