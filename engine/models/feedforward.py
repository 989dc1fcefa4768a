"""Feed-forward blocks: dense MLPs (gated or plain) and mixture-of-experts layers.

Routed experts are emitted as the training code stores them (``MoESpec.expert_storage``,
which the stack decides): ``per_expert`` is one tensor per expert per projection, named
as the families' per-expert Hugging Face checkpoints (Mixtral, Phi-MoE, Qwen-MoE,
DeepSeek) and held so by Megatron-Core's TEGroupedMLP; ``fused_gate_up`` is transformers
5's ``<Family>Experts`` (``experts.gate_up_proj`` ``(E, 2I, h)`` and
``experts.down_proj`` ``(E, h, I)``, e.g. ``modeling_mixtral.py`` ``MixtralExperts``);
``stacked`` is torchtitan's ``GroupedExperts`` (``w1``, ``w3`` ``(E, I, h)``, ``w2``
``(E, h, I)``). All three hold exactly the same elements: only the tensor count and the
dim FSDP2 chunks (the expert dim) differ. An unresolved ``auto`` lists the per-expert
checkpoint layout.
"""

from __future__ import annotations

from collections.abc import Iterator

from engine.models.spec import ArchitectureSpec, MoESpec
from engine.models.tensor import Role, Tensor, linear

# Mixtral and Phi-MoE name their expert projections w1 (gate), w3 (up), w2 (down); the
# other MoE checkpoints reuse the dense MLP's names.
_W_NAMES = ("w1", "w3", "w2")
_DEFAULT_NAMES = ("gate_proj", "up_proj", "down_proj")
_EXPERT_NAMES: dict[str, tuple[str, str, str]] = {"mixtral": _W_NAMES, "phimoe": _W_NAMES}
_BLOCK_SPARSE_FAMILIES = frozenset({"mixtral", "phimoe", "granitemoe"})
_ROUTER_NAMES: dict[str, str] = {"llama4": "router.weight", "granitemoe": "router.layer.weight"}
_FP32_ROUTER_FAMILIES = frozenset({"deepseek_v2", "deepseek_v3"})
_SHARED_NAMES: dict[str, str] = {"qwen2_moe": "shared_expert", "llama4": "shared_expert"}


def moe_block_name(spec: ArchitectureSpec) -> str:
    """The module name of a layer's feed-forward block (``block_sparse_moe`` for Mixtral)."""
    if spec.family == "llama4":
        return "feed_forward"  # Llama4TextDecoderLayer names dense and MoE blocks alike
    if spec.family in _BLOCK_SPARSE_FAMILIES and spec.moe is not None:
        if spec.moe.expert_storage == "fused_gate_up" and spec.family != "granitemoe":
            return "mlp"  # transformers 5 MixtralDecoderLayer / PhimoeDecoderLayer.mlp
        return "block_sparse_moe"
    return "mlp"


def dense_mlp(spec: ArchitectureSpec, p: str, i: int | None, inter: int) -> Iterator[Tensor]:
    """A dense MLP: gate/up/down (or fused gate_up) when gated, up/down when plain."""
    h, b = spec.hidden, spec.mlp_bias
    if spec.mlp == "gelu":
        up, down = ("c_fc", "c_proj") if spec.family == "starcoder2" else ("up_proj", "down_proj")
        yield from linear(f"{p}.{up}", inter, h, "up", b, i)
        yield from linear(f"{p}.{down}", h, inter, "down", b, i)
        return
    if spec.fused_gate_up:
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


def _router(spec: ArchitectureSpec, moe: MoESpec, p: str, i: int | None) -> Iterator[Tensor]:
    name = _ROUTER_NAMES.get(spec.family, "gate.weight")
    # transformers 5 keeps DeepSeek's router in fp32 whatever the load dtype
    # (DeepseekV3PreTrainedModel._keep_in_fp32_modules_strict = ["e_score_correction_bias",
    # "gate.weight"], DeepseekV2's ["gate.weight"]); the checkpoint stores it in bf16.
    fp32 = moe.expert_storage == "fused_gate_up" and spec.family in _FP32_ROUTER_FAMILIES
    shape = (moe.num_experts, spec.hidden)
    yield Tensor(f"{p}.{name}", shape, "router", "weight", i, keep_fp32=fp32)
    if moe.router_bias:
        # DeepSeek-V3's aux-loss-free balancing bias, kept in fp32 in the checkpoint.
        yield Tensor(
            f"{p}.gate.e_score_correction_bias",
            (moe.num_experts,),
            "router",
            "bias",
            i,
            dtype="fp32",
            keep_fp32=fp32,
            buffer=fp32,  # transformers 5: DeepseekV3TopkRouter's nn.Buffer
        )


def _shared(spec: ArchitectureSpec, moe: MoESpec, p: str, i: int | None) -> Iterator[Tensor]:
    """The always-active shared expert(s) inside the MoE block."""
    width = moe.shared_experts * (moe.shared_intermediate or moe.expert_intermediate)
    name = _SHARED_NAMES.get(spec.family, "shared_experts")
    roles: tuple[Role, Role, Role] = ("shared_gate", "shared_up", "shared_down")
    yield from _gated(spec, f"{p}.{name}", i, width, _DEFAULT_NAMES, roles)


def _granite_shared(
    spec: ArchitectureSpec, moe: MoESpec, p: str, i: int | None
) -> Iterator[Tensor]:
    """Granite-MoE-Shared's ``shared_mlp`` beside the experts: fused input, then output."""
    width = moe.shared_experts * (moe.shared_intermediate or moe.expert_intermediate)
    yield from linear(
        f"{p}.shared_mlp.input_linear", 2 * width, spec.hidden, "shared_gate_up", False, i
    )
    yield from linear(f"{p}.shared_mlp.output_linear", spec.hidden, width, "shared_down", False, i)


def _stacked(
    name: str, out_f: int, in_f: int, role: Role, bias: bool, e: int, i: int | None
) -> Iterator[Tensor]:
    """One projection of all ``e`` routed experts as one ``(E, out, in)`` parameter (and
    an ``(E, out)`` bias), as transformers 5 and torchtitan hold them."""
    yield Tensor(name, (e, out_f, in_f), role, "weight", i, stacked=True)
    if bias:
        yield Tensor(f"{name}_bias", (e, out_f), role, "bias", i, stacked=True)


def _routed(spec: ArchitectureSpec, moe: MoESpec, p: str, i: int | None) -> Iterator[Tensor]:
    """The routed experts of one MoE block, in the block's storage."""
    h, b, e, inter = spec.hidden, spec.mlp_bias, moe.num_experts, moe.expert_intermediate
    if moe.expert_storage == "fused_gate_up":
        yield from _stacked(f"{p}.experts.gate_up_proj", 2 * inter, h, "expert_gate_up", b, e, i)
        yield from _stacked(f"{p}.experts.down_proj", h, inter, "expert_down", b, e, i)
        return
    if moe.expert_storage == "stacked":
        yield from _stacked(f"{p}.experts.w1", inter, h, "expert_gate", b, e, i)
        yield from _stacked(f"{p}.experts.w2", h, inter, "expert_down", b, e, i)
        yield from _stacked(f"{p}.experts.w3", inter, h, "expert_up", b, e, i)
        return
    names = _EXPERT_NAMES.get(spec.family, _DEFAULT_NAMES)
    roles: tuple[Role, Role, Role] = ("expert_gate", "expert_up", "expert_down")
    for x in range(e):
        yield from _gated(spec, f"{p}.experts.{x}", i, inter, names, roles, expert=x)


def moe_mlp(spec: ArchitectureSpec, moe: MoESpec, p: str, i: int | None) -> Iterator[Tensor]:
    """Router, routed experts and shared experts of one MoE block at prefix ``p``."""
    yield from _router(spec, moe, p, i)
    yield from _routed(spec, moe, p, i)
    if moe.shared_experts and spec.family != "granitemoe":
        yield from _shared(spec, moe, p, i)
    if moe.shared_expert_gate:
        # Qwen2-MoE builds the gate even when shared_expert_intermediate_size is 0.
        yield Tensor(f"{p}.shared_expert_gate.weight", (1, spec.hidden), "router", "weight", i)


def feed_forward(spec: ArchitectureSpec, p: str, index: int, layer: int | None) -> Iterator[Tensor]:
    """The feed-forward block of the layer at position ``index``: MoE, or dense.

    ``p`` is the layer prefix; the block's own name comes from :func:`moe_block_name`.
    ``layer`` is the tag stored on the tensors (None for the MTP module's block).
    """
    moe = spec.moe
    dense = f"{p}.feed_forward" if spec.family == "llama4" else f"{p}.mlp"
    if moe is None:
        yield from dense_mlp(spec, dense, layer, spec.intermediate)
    elif not moe.is_moe_layer(index):
        yield from dense_mlp(spec, dense, layer, moe.dense_intermediate or spec.intermediate)
    else:
        yield from moe_mlp(spec, moe, f"{p}.{moe_block_name(spec)}", layer)
        if moe.shared_experts and spec.family == "granitemoe":
            yield from _granite_shared(spec, moe, p, layer)
