"""The architecture spec: the few numbers that fix a model's every parameter tensor.

A plan embeds the full spec (not just a preset name) so that a saved plan reopens
identically even after the preset catalogue changes. Field names follow Hugging Face
``config.json`` meanings; the family selects the quirks (biases, extra norms, fused
projections) that a plain hidden/layers/heads triple cannot express.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from engine.sections.base import fields_equal, memo_hash

Family = Literal[
    "llama",
    "mistral",
    "qwen2",
    "qwen3",
    "gemma2",
    "gemma3",
    "phi3",
    "gpt2",
    "gpt_neox",
    "mixtral",
    "qwen3_moe",
    "deepseek_v3",
    "olmo2",
    "qwen2_moe",
    "deepseek_v2",
    "cohere",
    "cohere2",
    "starcoder2",
    "stablelm",
    "falcon",
    "granite",
    "granitemoe",
    "phimoe",
    "llama4",
]
"""One value per Hugging Face ``model_type`` whose checkpoint layout differs (names, norm
placement, q/k-norm shape); multimodal wrappers map to their language model's family."""

Residual = Literal["sequential", "parallel", "parallel_two_norms"]
"""How a layer's attention and MLP combine: ``sequential`` (x + attn(norm(x)), then
+ mlp(norm(.)): Llama and most decoders); ``parallel`` (both branches read one norm's
output and add to the same residual: GPT-J, Falcon-7B/11B, Cohere, StableLM-2-12B);
``parallel_two_norms`` (each branch has its own norm of the same input: GPT-NeoX/Pythia,
Falcon-40B/180B)."""

StoredDtype = Literal["fp32", "bf16", "fp16", "fp8_e4m3"]
"""``fp8_e4m3``: block-quantised checkpoints (DeepSeek-V3) whose linear weights are FP8
while norms, router, embeddings and head stay bf16."""


_FUSED_GELU_FAMILIES = frozenset({"gpt2", "gpt_neox", "falcon"})
"""Families whose checkpoints hold one fused qkv tensor and a plain GELU MLP."""

_RESIDUALS: dict[str, tuple[Residual, ...]] = {
    "gpt2": ("sequential",),
    "gpt_neox": ("sequential", "parallel_two_norms"),
    "falcon": ("sequential", "parallel", "parallel_two_norms"),
    "cohere": ("parallel",),
    "cohere2": ("parallel",),
    "olmo2": ("sequential",),
}
"""Residual layouts each family's modeling code can build (others: sequential or parallel)."""


ExpertStorage = Literal["auto", "per_expert", "fused_gate_up", "stacked"]
"""How routed experts are held as parameters (:attr:`MoESpec.expert_storage`)."""


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    def __hash__(self) -> int:
        """Worked out once per object, as for plan sections
        (:func:`engine.sections.base.memo_hash`): the engine's caches key on the
        architecture, and pydantic's own hash walks every field (and the MoE / MLA
        specs) on each lookup — some 5 µs, about 25 lookups per estimate."""
        return memo_hash(self)

    def __eq__(self, other: object) -> bool:
        return fields_equal(self, other)


class MoESpec(_Frozen):
    """Mixture-of-experts feed-forward: routed experts, optional shared experts."""

    num_experts: int = Field(ge=1, le=4096, description="Routed experts per MoE layer (count).")
    top_k: int = Field(ge=1, le=64, description="Experts each token is routed to (count).")
    expert_intermediate: int = Field(
        ge=1, le=1_000_000, description="Intermediate size of one routed expert (elements)."
    )
    shared_experts: int = Field(
        default=0, ge=0, le=64, description="Always-active shared experts (count)."
    )
    shared_intermediate: int | None = Field(
        default=None,
        ge=1,
        le=1_000_000,
        description="Intermediate size of one shared expert; None = expert_intermediate.",
    )
    first_dense_layers: int = Field(
        default=0, ge=0, le=1000, description="Leading layers with a dense MLP instead (count)."
    )
    dense_intermediate: int | None = Field(
        default=None,
        ge=1,
        le=1_000_000,
        description="Intermediate size of the dense layers; None = the model's intermediate.",
    )
    router_bias: bool = Field(
        default=False,
        description="Router carries a per-expert bias (DeepSeek-V3 score correction).",
    )
    capacity_factor: float = Field(
        default=1.0, ge=0.1, le=16.0, description="Token capacity per expert relative to uniform."
    )
    layer_step: int = Field(
        default=1,
        ge=1,
        le=1000,
        description="A layer i past the dense ones is MoE when (i + 1) % layer_step == 0 "
        "(Qwen-MoE decoder_sparse_step, Llama-4 interleave_moe_layer_step; 1 = every layer).",
    )
    shared_expert_gate: bool = Field(
        default=False,
        description="A sigmoid gate Linear(h, 1) scales the shared expert (Qwen2-MoE).",
    )

    expert_storage: ExpertStorage = Field(
        default="auto",
        description="How the training code stores the routed experts: per_expert (one "
        "matrix per expert and projection: Megatron-Core TEGroupedMLP, DeepSpeed-MoE, the "
        "per-expert checkpoints), fused_gate_up (transformers 5: experts.gate_up_proj "
        "(E, 2I, h) and experts.down_proj (E, h, I)) or stacked (torchtitan GroupedExperts: "
        "w1, w3 (E, I, h) and w2 (E, h, I)). Same elements; FSDP2 chunks a 3-D tensor on "
        "the expert dim and the optimizer keeps one step counter per tensor. auto = the "
        "stack's (per_expert under Megatron-Core, stacked under torchtitan, else fused_gate_up).",
    )

    def is_moe_layer(self, index: int) -> bool:
        """Whether decoder layer ``index`` holds experts (else a dense MLP)."""
        return index >= self.first_dense_layers and (index + 1) % self.layer_step == 0


class MLASpec(_Frozen):
    """Multi-head latent attention (DeepSeek-V2/V3): low-rank Q and compressed KV."""

    q_lora_rank: int | None = Field(
        default=None,
        ge=1,
        le=100_000,
        description="Rank of the query down-projection; None = a full-rank q_proj (V2-Lite).",
    )
    kv_lora_rank: int = Field(
        ge=1, le=100_000, description="Width of the compressed KV latent (elements)."
    )
    qk_nope_head_dim: int = Field(
        ge=1, le=4096, description="Per-head query/key dims without rotary (elements)."
    )
    qk_rope_head_dim: int = Field(
        ge=1, le=4096, description="Per-head rotary query/key dims, shared key part (elements)."
    )
    v_head_dim: int = Field(ge=1, le=4096, description="Per-head value dims (elements).")


class ArchitectureSpec(_Frozen):
    """A decoder-only transformer as its config describes it."""

    family: Family = Field(description="Architecture family; selects the family's quirks.")
    hidden: int = Field(ge=1, le=1_000_000, description="Hidden size h (elements).")
    layers: int = Field(ge=1, le=10_000, description="Decoder layers L (count).")
    heads: int = Field(ge=1, le=10_000, description="Attention heads a (count).")
    kv_heads: int = Field(ge=1, le=10_000, description="Key/value heads k (count); = a for MHA.")
    head_dim: int | None = Field(
        default=None, ge=1, le=100_000, description="Head dim d; None = hidden / heads."
    )
    intermediate: int = Field(ge=1, le=10_000_000, description="MLP intermediate size I.")
    vocab: int = Field(ge=1, le=10_000_000, description="Vocabulary size V (tokens).")
    max_position: int = Field(
        default=4096, ge=1, le=100_000_000, description="Max positions (learned-position tables)."
    )
    tied_embeddings: bool = Field(default=False, description="lm_head shares the embedding matrix.")
    mlp: Literal["swiglu", "geglu", "gelu"] = Field(
        default="swiglu", description="Gated (gate+up+down) or plain (up+down) MLP."
    )
    norm: Literal["rmsnorm", "layernorm"] = Field(default="rmsnorm")
    norm_bias: bool = Field(default=False, description="Norms carry a bias (LayerNorm).")
    qkv_bias: bool = Field(default=False, description="q/k/v projections carry biases.")
    o_bias: bool = Field(default=False, description="Attention output projection carries a bias.")
    mlp_bias: bool = Field(default=False, description="MLP projections carry biases.")
    lm_head_bias: bool = Field(default=False, description="lm_head carries a bias.")
    qk_norm: bool = Field(default=False, description="Per-head RMSNorm on q and k (Qwen3, Gemma3).")
    sandwich_norm: bool = Field(
        default=False, description="Extra post-attention / post-MLP norms (Gemma 2/3)."
    )
    fused_qkv: bool = Field(default=False, description="One qkv projection tensor (Phi-3, NeoX).")
    fused_gate_up: bool = Field(default=False, description="One gate_up tensor (Phi-3).")
    position: Literal["rotary", "learned"] = Field(default="rotary")
    residual: Residual = Field(
        default="sequential",
        description="How attention and MLP combine: sequential, parallel (one shared norm) "
        "or parallel_two_norms.",
    )
    moe: MoESpec | None = None
    mla: MLASpec | None = None
    mtp_layers: int = Field(
        default=0,
        ge=0,
        le=16,
        description="Multi-token-prediction modules trained with the model (DeepSeek-V3; "
        "0 = none, as transformers builds it). Each shares the main embedding and head.",
    )
    stored_dtype: StoredDtype = Field(
        default="bf16", description="Dtype of the published checkpoint's weights."
    )

    @model_validator(mode="after")
    def _check_heads(self) -> ArchitectureSpec:
        if self.heads % self.kv_heads != 0:
            raise ValueError(
                f"heads ({self.heads}) must be a multiple of kv_heads ({self.kv_heads})"
            )
        if self.head_dim is None and self.mla is None and self.hidden % self.heads != 0:
            raise ValueError(
                f"hidden ({self.hidden}) is not divisible by heads ({self.heads}); set head_dim"
            )
        if self.fused_gate_up and self.mlp == "gelu":
            raise ValueError("fused_gate_up needs a gated MLP (swiglu or geglu), not gelu")
        if self.moe is not None and self.moe.top_k > self.moe.num_experts:
            raise ValueError(
                f"moe.top_k ({self.moe.top_k}) exceeds moe.num_experts ({self.moe.num_experts})"
            )
        if self.moe is not None and self.moe.first_dense_layers > self.layers:
            raise ValueError(
                f"moe.first_dense_layers ({self.moe.first_dense_layers}) exceeds layers "
                f"({self.layers})"
            )
        if self.family in _FUSED_GELU_FAMILIES and (self.mlp != "gelu" or not self.fused_qkv):
            raise ValueError(
                f"the {self.family} layout has a fused qkv and a plain GELU MLP: set "
                "fused_qkv=true and mlp='gelu'"
            )
        if self.mtp_layers and self.family != "deepseek_v3":
            raise ValueError("mtp_layers is only modelled for the deepseek_v3 family")
        allowed = _RESIDUALS.get(self.family, ("sequential", "parallel"))
        if self.residual not in allowed:
            raise ValueError(
                f"residual {self.residual!r} is not a layout of the {self.family} family "
                f"(choose {' or '.join(allowed)})"
            )
        if self.residual != "sequential" and self.sandwich_norm:
            raise ValueError("sandwich_norm needs residual='sequential'")
        return self

    @property
    def dim_per_head(self) -> int:
        """Head dimension d, explicit or hidden / heads."""
        return self.head_dim if self.head_dim is not None else self.hidden // self.heads
