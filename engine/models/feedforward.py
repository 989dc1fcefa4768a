"""Feed-forward blocks: dense MLPs (gated or plain) and mixture-of-experts layers.

Routed experts are emitted one tensor per expert per projection, named as the Hugging
Face checkpoints name them, so expert parallelism can divide them by index and a
safetensors cross-check can match them by name.
"""

from __future__ import annotations

from collections.abc import Iterator

from engine.models.spec import ArchitectureSpec, MoESpec
from engine.models.tensor import Role, Tensor, linear

# Mixtral names its expert projections w1 (gate), w3 (up), w2 (down); newer MoE
# checkpoints (Qwen3-MoE, DeepSeek-V3) reuse the dense MLP's names.
_EXPERT_NAMES: dict[str, tuple[str, str, str]] = {
    "mixtral": ("w1", "w3", "w2"),
}
_DEFAULT_EXPERT_NAMES = ("gate_proj", "up_proj", "down_proj")


def moe_block_name(spec: ArchitectureSpec) -> str:
    """The module name of a layer's feed-forward block (``block_sparse_moe`` for Mixtral)."""
    return "block_sparse_moe" if spec.family == "mixtral" and spec.moe is not None else "mlp"


def dense_mlp(spec: ArchitectureSpec, p: str, i: int | None, inter: int) -> Iterator[Tensor]:
    """A dense MLP: gate/up/down (or fused gate_up) when gated, up/down when plain."""
    h, b = spec.hidden, spec.mlp_bias
    if spec.mlp == "gelu":
        yield from linear(f"{p}.up_proj", inter, h, "up", b, i)
    elif spec.fused_gate_up:
        yield from linear(f"{p}.gate_up_proj", 2 * inter, h, "gate_up", b, i)
    else:
        yield from linear(f"{p}.gate_proj", inter, h, "gate", b, i)
        yield from linear(f"{p}.up_proj", inter, h, "up", b, i)
    yield from linear(f"{p}.down_proj", h, inter, "down", b, i)


def _gated(
    spec: ArchitectureSpec,
    p: str,
    i: int | None,
    inter: int,
    names: tuple[str, str, str],
    roles: tuple[Role, Role, Role],
    expert: int | None = None,
) -> Iterator[Tensor]:
    h, b = spec.hidden, spec.mlp_bias
    yield from linear(f"{p}.{names[0]}", inter, h, roles[0], b, i, expert=expert)
    yield from linear(f"{p}.{names[1]}", inter, h, roles[1], b, i, expert=expert)
    yield from linear(f"{p}.{names[2]}", h, inter, roles[2], b, i, expert=expert)


def moe_mlp(spec: ArchitectureSpec, moe: MoESpec, p: str, i: int | None) -> Iterator[Tensor]:
    """Router, routed experts and (DeepSeek) shared experts of one MoE layer."""
    yield Tensor(f"{p}.gate.weight", (moe.num_experts, spec.hidden), "router", "weight", i)
    if moe.router_bias:
        # DeepSeek-V3's aux-loss-free balancing bias, kept in fp32 in the checkpoint.
        yield Tensor(
            f"{p}.gate.e_score_correction_bias",
            (moe.num_experts,),
            "router",
            "bias",
            i,
            dtype="fp32",
        )
    names = _EXPERT_NAMES.get(spec.family, _DEFAULT_EXPERT_NAMES)
    for e in range(moe.num_experts):
        yield from _gated(
            spec,
            f"{p}.experts.{e}",
            i,
            moe.expert_intermediate,
            names,
            ("expert_gate", "expert_up", "expert_down"),
            expert=e,
        )
    if moe.shared_experts:
        width = moe.shared_experts * (moe.shared_intermediate or moe.expert_intermediate)
        yield from _gated(
            spec,
            f"{p}.shared_experts",
            i,
            width,
            _DEFAULT_EXPERT_NAMES,
            ("shared_gate", "shared_up", "shared_down"),
        )


def feed_forward(spec: ArchitectureSpec, p: str, index: int, layer: int | None) -> Iterator[Tensor]:
    """The feed-forward block of the layer at position ``index``: MoE, or dense if leading.

    ``p`` is the layer prefix; the block's own name comes from :func:`moe_block_name`.
    ``layer`` is the tag stored on the tensors (None for the MTP module's block).
    """
    moe = spec.moe
    if moe is None:
        yield from dense_mlp(spec, f"{p}.mlp", layer, spec.intermediate)
    elif index < moe.first_dense_layers:
        inter = moe.dense_intermediate or spec.intermediate
        yield from dense_mlp(spec, f"{p}.mlp", layer, inter)
    else:
        yield from moe_mlp(spec, moe, f"{p}.{moe_block_name(spec)}", layer)
