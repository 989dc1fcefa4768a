"""The hf-transformers profile's view of one decoder layer: shapes, trainability, family.

Autograd keeps a tensor only for a gradient someone needs, so what a block saves
depends on whether its input needs a gradient. In the first layer after a frozen
embedding (LoRA) it does not: a frozen projection there keeps nothing, SDPA keeps
nothing unless q, k or v comes out of a trained or adapted projection, and an MLP
reading that layer's input (a parallel layout) keeps nothing unless it is trained or
adapted itself. :func:`needs_grad` is that rule.
"""

from __future__ import annotations

from dataclasses import dataclass

from engine.ledger.activations.geometry import Geometry, Trainability
from engine.ledger.activations.traits import FamilyTraits, traits_of
from engine.models.spec import ArchitectureSpec


@dataclass(frozen=True, slots=True)
class HfLayer:
    """Everything a layer's saved set depends on."""

    g: Geometry
    tr: Trainability
    arch: ArchitectureSpec
    attention: str  # runtime.attention
    selective: bool  # selective recompute drops the attention core
    param_fp32: bool  # parameters are fp32 when the norms run (no fp32 weight copies)

    @property
    def t(self) -> FamilyTraits:
        return traits_of(self.arch)

    @property
    def rotary(self) -> bool:
        return self.arch.position == "rotary"

    def with_trainability(self, tr: Trainability) -> HfLayer:
        return HfLayer(self.g, tr, self.arch, self.attention, self.selective, self.param_fp32)


def needs_grad(tr: Trainability, input_grad: bool, roles: tuple[str, ...]) -> bool:
    """Whether the output of linears with these roles needs a gradient: their input
    does, or one of them is trained or adapted."""
    return input_grad or any(r in tr.linear_roles or r in tr.adapter_roles for r in roles)


def attention_roles(c: HfLayer) -> tuple[str, ...]:
    """The roles of the projections that read the attention block's input: a fused
    projection is one linear (one saved input, one adapter), MLA's are the down-
    projections (a full-rank q_proj when q is not low-rank)."""
    a = c.arch
    if a.mla is not None:
        return ("q_a" if a.mla.q_lora_rank else "q", "kv_a")
    return ("qkv",) if a.fused_qkv else ("q", "k", "v")


def mlp_roles(c: HfLayer) -> tuple[str, ...]:
    """The roles of the projections that read a dense MLP's input."""
    a = c.arch
    if a.mlp == "gelu":
        return ("up",)
    return ("gate_up",) if a.fused_gate_up else ("gate", "up")


def moe_roles(c: HfLayer) -> tuple[str, ...]:
    """Who keeps an MoE layer's norm output: the router (unless it copies it to fp32),
    the shared experts' gate/up, Qwen2-MoE's shared-expert gate (a "router" role)."""
    assert c.arch.moe is not None
    m = c.arch.moe
    out: tuple[str, ...] = () if c.t.router_fp32_input else ("router",)
    if m.shared_experts:
        out += ("shared_gate", "shared_up")
    if m.shared_expert_gate and c.t.router_fp32_input:
        out += ("router",)
    return out
