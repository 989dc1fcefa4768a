"""Architecture spec → every parameter tensor, exact to the element.

Each tensor carries a *role* because later rules key on it: tensor parallelism splits
column-parallel roles on dim 0 and row-parallel roles on dim 1, pipeline stages place
layers by index, LoRA targets by role, expert parallelism divides routed experts.
Shapes follow PyTorch's ``nn.Linear`` convention ``(out_features, in_features)``, which
is also the dim 0 that FSDP2 chunks.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from math import prod
from typing import Literal

from engine.models.spec import ArchitectureSpec

Role = Literal[
    "embedding",
    "position_embedding",
    "q",
    "k",
    "v",
    "qkv",
    "o",
    "q_a",
    "q_b",
    "kv_a",
    "kv_b",
    "gate",
    "up",
    "gate_up",
    "down",
    "norm",
    "qk_norm",
    "router",
    "expert_gate",
    "expert_up",
    "expert_down",
    "shared_gate",
    "shared_up",
    "shared_down",
    "final_norm",
    "lm_head",
    "mtp",
]

TensorKind = Literal["weight", "bias"]


@dataclass(frozen=True, slots=True)
class Tensor:
    """One parameter tensor as the checkpoint stores it."""

    name: str
    shape: tuple[int, ...]
    role: Role
    kind: TensorKind = "weight"
    layer: int | None = None  # decoder layer index; None for embeddings, final norm, lm_head

    @property
    def numel(self) -> int:
        return prod(self.shape)


def _linear(
    prefix: str, out_f: int, in_f: int, role: Role, bias: bool, layer: int | None
) -> Iterator[Tensor]:
    yield Tensor(f"{prefix}.weight", (out_f, in_f), role, "weight", layer)
    if bias:
        yield Tensor(f"{prefix}.bias", (out_f,), role, "bias", layer)


def _norm(prefix: str, width: int, bias: bool, layer: int | None, role: Role) -> Iterator[Tensor]:
    yield Tensor(f"{prefix}.weight", (width,), role, "weight", layer)
    if bias:
        yield Tensor(f"{prefix}.bias", (width,), role, "bias", layer)


def _attention(spec: ArchitectureSpec, i: int) -> Iterator[Tensor]:
    p = f"model.layers.{i}.self_attn"
    h, d = spec.hidden, spec.dim_per_head
    q_out, kv_out = spec.heads * d, spec.kv_heads * d
    if spec.fused_qkv:
        yield from _linear(f"{p}.qkv_proj", q_out + 2 * kv_out, h, "qkv", spec.qkv_bias, i)
    else:
        yield from _linear(f"{p}.q_proj", q_out, h, "q", spec.qkv_bias, i)
        yield from _linear(f"{p}.k_proj", kv_out, h, "k", spec.qkv_bias, i)
        yield from _linear(f"{p}.v_proj", kv_out, h, "v", spec.qkv_bias, i)
    yield from _linear(f"{p}.o_proj", h, q_out, "o", spec.o_bias, i)
    if spec.qk_norm:
        yield from _norm(f"{p}.q_norm", d, False, i, "qk_norm")
        yield from _norm(f"{p}.k_norm", d, False, i, "qk_norm")


def _dense_mlp(spec: ArchitectureSpec, i: int, inter: int) -> Iterator[Tensor]:
    p = f"model.layers.{i}.mlp"
    h, b = spec.hidden, spec.mlp_bias
    if spec.mlp == "gelu":
        yield from _linear(f"{p}.up_proj", inter, h, "up", b, i)
    elif spec.fused_gate_up:
        yield from _linear(f"{p}.gate_up_proj", 2 * inter, h, "gate_up", b, i)
    else:
        yield from _linear(f"{p}.gate_proj", inter, h, "gate", b, i)
        yield from _linear(f"{p}.up_proj", inter, h, "up", b, i)
    yield from _linear(f"{p}.down_proj", h, inter, "down", b, i)


def _layer(spec: ArchitectureSpec, i: int) -> Iterator[Tensor]:
    p = f"model.layers.{i}"
    nb = spec.norm_bias
    yield from _norm(f"{p}.input_layernorm", spec.hidden, nb, i, "norm")
    yield from _attention(spec, i)
    yield from _norm(f"{p}.post_attention_layernorm", spec.hidden, nb, i, "norm")
    yield from _dense_mlp(spec, i, spec.intermediate)


def _unsupported(spec: ArchitectureSpec) -> str | None:
    if spec.moe is not None or spec.mla is not None:
        return "mixture-of-experts and MLA inventories"
    if spec.sandwich_norm or spec.position == "learned" or spec.mtp_layers:
        return f"the {spec.family} family's extra modules"
    return None


def build_inventory(spec: ArchitectureSpec) -> tuple[Tensor, ...]:
    """Every parameter tensor of the model, in checkpoint order."""
    missing = _unsupported(spec)
    if missing is not None:
        raise NotImplementedError(f"the tensor inventory does not cover {missing} yet")
    tensors: list[Tensor] = [
        Tensor("model.embed_tokens.weight", (spec.vocab, spec.hidden), "embedding")
    ]
    for i in range(spec.layers):
        tensors.extend(_layer(spec, i))
    tensors.extend(_norm("model.norm", spec.hidden, spec.norm_bias, None, "final_norm"))
    if not spec.tied_embeddings:
        tensors.extend(
            _linear("lm_head", spec.vocab, spec.hidden, "lm_head", spec.lm_head_bias, None)
        )
    return tuple(tensors)


def total_params(tensors: tuple[Tensor, ...]) -> int:
    return sum(t.numel for t in tensors)
