"""Checkpoint layouts: how each family arranges and names its tensors.

Three layouts cover the catalogue. The Hugging Face Llama layout (``model.layers.{i}``)
serves Llama, Mistral, Qwen2/3, Gemma 2/3, Phi-3, Mixtral, Qwen3-MoE and DeepSeek-V3,
whose differences are switches in the spec (biases, q/k norms, sandwich norms, fused
projections, MoE, MLA, MTP). GPT-2 and GPT-NeoX keep their original names.
"""

from __future__ import annotations

from collections.abc import Iterator

from engine.models.attention import attention, gqa_attention
from engine.models.feedforward import feed_forward
from engine.models.spec import ArchitectureSpec
from engine.models.tensor import Tensor, linear, norm


def _decoder_block(
    spec: ArchitectureSpec, p: str, index: int, layer: int | None
) -> Iterator[Tensor]:
    nb = spec.norm_bias
    yield from norm(f"{p}.input_layernorm", spec.hidden, nb, layer, "norm")
    yield from attention(spec, f"{p}.self_attn", layer)
    yield from norm(f"{p}.post_attention_layernorm", spec.hidden, nb, layer, "norm")
    if spec.sandwich_norm:
        # Gemma 2/3 normalise both before and after the MLP (and after attention).
        yield from norm(f"{p}.pre_feedforward_layernorm", spec.hidden, nb, layer, "norm")
        yield from norm(f"{p}.post_feedforward_layernorm", spec.hidden, nb, layer, "norm")
    yield from feed_forward(spec, p, index, layer)


def _mtp_module(spec: ArchitectureSpec, k: int) -> Iterator[Tensor]:
    """DeepSeek-V3's multi-token-prediction module as its checkpoint stores it.

    Stored as ``model.layers.{L + k}``: its own copy of the embedding, norms of the
    embedding and of the previous hidden state, a ``2h → h`` projection, one full decoder
    block (MoE), and an output norm and head. Tagged ``module="mtp"`` with ``layer=None``
    so that placement keeps it with the output head on the last pipeline stage.
    """
    index = spec.layers + k
    p = f"model.layers.{index}"
    h = spec.hidden
    out: list[Tensor] = [Tensor(f"{p}.embed_tokens.weight", (spec.vocab, h), "mtp_embedding")]
    out += norm(f"{p}.enorm", h, False, None, "mtp")
    out += norm(f"{p}.hnorm", h, False, None, "mtp")
    out += linear(f"{p}.eh_proj", h, 2 * h, "mtp", False, None)
    out += _decoder_block(spec, p, index, None)
    out += norm(f"{p}.shared_head.norm", h, False, None, "mtp")
    out.append(Tensor(f"{p}.shared_head.head.weight", (spec.vocab, h), "mtp_head"))
    for t in out:
        yield Tensor(
            t.name, t.shape, t.role, t.kind, None, t.dtype, t.stored_transposed, "mtp", t.expert
        )


def llama_layout(spec: ArchitectureSpec) -> Iterator[Tensor]:
    """The Hugging Face ``LlamaForCausalLM``-style layout and its relatives."""
    yield Tensor("model.embed_tokens.weight", (spec.vocab, spec.hidden), "embedding")
    for i in range(spec.layers):
        yield from _decoder_block(spec, f"model.layers.{i}", i, i)
    yield from norm("model.norm", spec.hidden, spec.norm_bias, None, "final_norm")
    if not spec.tied_embeddings:
        yield from linear("lm_head", spec.vocab, spec.hidden, "lm_head", spec.lm_head_bias, None)
    for k in range(spec.mtp_layers):
        yield from _mtp_module(spec, k)


def gpt2_layout(spec: ArchitectureSpec) -> Iterator[Tensor]:
    """GPT-2: learned positions, LayerNorm with bias, fused ``c_attn``, ``Conv1D`` weights.

    Names follow the ``gpt2`` checkpoint (saved from ``GPT2Model``, so no ``transformer.``
    prefix). ``Conv1D`` stores weights as ``(in, out)``: marked ``stored_transposed``.
    The causal-mask buffers ``h.{i}.attn.bias`` that some GPT-2 files carry are not
    parameters and are not listed.
    """
    h, nb = spec.hidden, spec.norm_bias
    yield Tensor("wte.weight", (spec.vocab, h), "embedding")
    if spec.position == "learned":
        yield Tensor("wpe.weight", (spec.max_position, h), "position_embedding")
    for i in range(spec.layers):
        p = f"h.{i}"
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
    yield from norm("ln_f", h, nb, None, "final_norm")
    if not spec.tied_embeddings:
        yield from linear("lm_head", spec.vocab, h, "lm_head", spec.lm_head_bias, None)


def neox_layout(spec: ArchitectureSpec) -> Iterator[Tensor]:
    """GPT-NeoX / Pythia: fused ``query_key_value`` with bias, LayerNorm, untied ``embed_out``.

    The parallel residual changes the computation, not the parameters.
    """
    h, nb = spec.hidden, spec.norm_bias
    yield Tensor("gpt_neox.embed_in.weight", (spec.vocab, h), "embedding")
    if spec.position == "learned":
        yield Tensor("gpt_neox.embed_pos.weight", (spec.max_position, h), "position_embedding")
    for i in range(spec.layers):
        p = f"gpt_neox.layers.{i}"
        yield from norm(f"{p}.input_layernorm", h, nb, i, "norm")
        yield from norm(f"{p}.post_attention_layernorm", h, nb, i, "norm")
        yield from gqa_attention(
            spec, f"{p}.attention", i, qkv_name="query_key_value", o_name="dense"
        )
        yield from linear(f"{p}.mlp.dense_h_to_4h", spec.intermediate, h, "up", spec.mlp_bias, i)
        yield from linear(f"{p}.mlp.dense_4h_to_h", h, spec.intermediate, "down", spec.mlp_bias, i)
    yield from norm("gpt_neox.final_layer_norm", h, nb, None, "final_norm")
    if not spec.tied_embeddings:
        yield from linear("embed_out", spec.vocab, h, "lm_head", spec.lm_head_bias, None)


def family_layout(spec: ArchitectureSpec) -> Iterator[Tensor]:
    """Every tensor of ``spec`` in checkpoint order, by the family's layout."""
    if spec.family == "gpt2":
        yield from gpt2_layout(spec)
    elif spec.family == "gpt_neox":
        yield from neox_layout(spec)
    else:
        yield from llama_layout(spec)
