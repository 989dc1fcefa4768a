"""What each family's transformers implementation does that changes its saved tensors.

The architecture spec says which tensors exist; this table says how the family's
``modeling_<family>.py`` (transformers 5.24) computes with them, where that changes
what autograd keeps for backward:

- the **norm kind** (:data:`NormKind`): Llama's ``RMSNorm`` multiplies its weight into
  the 16-bit normalised tensor; OLMo-2's multiplies in fp32 (``(weight * x).to(dtype)``);
  Gemma's ``(1 + w)`` product is fp32 and keeps the fp32 ``1 + w``; ``nn.LayerNorm``
  keeps its input and per-row mean and rstd; Cohere's ``CohereLayerNorm`` centres in fp32
  twice and keeps an fp32 copy of its weight;
- the **q/k norm** (kind and scope: one norm per head, over the whole projection, or
  Llama-4's weightless L2 norm);
- **norm placement**: Gemma's sandwich (four per layer), OLMo-2's post-norms only;
- the **activation** as the family's ``hidden_act`` runs it: a fused kernel keeping its
  input (SiLU, GELU, tanh-GELU), or GPT-2's composite ``gelu_new`` (``NewGELUActivation``:
  pow, tanh and two products, four tensors of the intermediate width);
- **soft-capping** of attention scores (Gemma-2 eager: tanh output kept, s × s) and of
  the final logits (Gemma-2: tanh output kept, T × V);
- the **router** of an MoE layer (see :mod:`engine.ledger.activations.moe`).

Each entry names its modeling file so a row's formula can cite it.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Literal

from engine.models.spec import ArchitectureSpec

TRANSFORMERS = "transformers 5.24"
"""The implementation version the hf-transformers profile follows."""

NormKind = Literal["rms", "rms_fp32_product", "rms_gemma", "layernorm", "layernorm_fp32"]
QkScope = Literal["head", "whole", "l2"]
Activation = Literal["silu", "gelu", "gelu_tanh", "gelu_new"]
Router = Literal[
    "softmax_topk",  # Mixtral / Qwen-MoE / Phi-MoE-like top-k of an fp32 softmax
    "sigmoid_group",  # DeepSeek-V3: fp32 gate, sigmoid, group-limited top-k
    "softmax_group",  # DeepSeek-V2: fp32 gate, softmax, (group-limited) greedy top-k
    "granite",  # GraniteMoe: top-k of the logits, softmax over the k
    "sparsemixer",  # Phi-MoE: sparsemixer top-2
    "llama4",  # Llama-4: top-k logits, sigmoid scores, inputs scaled before the experts
]


@dataclass(frozen=True, slots=True)
class FamilyTraits:
    """One family's implementation facts (see the module docstring)."""

    module: str  # modeling file, e.g. "llama/modeling_llama.py"
    norm: NormKind = "rms"
    qk_norm: NormKind = "rms"
    qk_scope: QkScope = "head"
    activation: Activation = "silu"
    pre_norms: bool = True  # input / post-attention norms before each block
    post_norms: bool = False  # norms on each block's output (Gemma sandwich, OLMo-2)
    attn_softcap: bool = False
    final_softcap: bool = False
    router: Router = "softmax_topk"
    router_fp32_input: bool = False  # the router's linear runs on an fp32 copy
    topk_renorm: bool = False  # top-k weights divided by their sum in place
    routing_dtype_compute: bool = False  # routing weights cast to the compute dtype
    # shared experts run after the routed ones (DeepseekV2Moe / DeepseekV3MoE.forward:
    # ``hidden_states + self.shared_experts(residuals)``), so their backward runs first
    shared_after_routed: bool = False
    rotary_fraction: float = 1.0  # of head_dim rotated (config's partial_rotary_factor)
    explicit_mask: bool = False  # a (b, 1, s, s) mask is always passed to SDPA
    embed_scale: bool = False  # the embedding holds a 0-d embed_scale buffer (Gemma)

    @property
    def source(self) -> str:
        return f"{self.module} ({TRANSFORMERS})"

    @property
    def source_key(self) -> str:
        """The family's key in ``resources/sources.json`` (``hf-transformers-<dir>``)."""
        return "hf-transformers-" + self.module.split("/")[0]


_LLAMA = FamilyTraits("llama/modeling_llama.py")
_TRAITS: dict[str, FamilyTraits] = {
    "llama": _LLAMA,
    "mistral": replace(_LLAMA, module="mistral/modeling_mistral.py"),
    "qwen2": replace(_LLAMA, module="qwen2/modeling_qwen2.py"),
    "qwen3": replace(_LLAMA, module="qwen3/modeling_qwen3.py"),
    "granite": replace(_LLAMA, module="granite/modeling_granite.py"),
    "phi3": replace(_LLAMA, module="phi3/modeling_phi3.py"),
    "gemma2": FamilyTraits(
        "gemma2/modeling_gemma2.py",
        norm="rms_gemma",
        qk_norm="rms_gemma",
        activation="gelu_tanh",
        post_norms=True,
        attn_softcap=True,
        final_softcap=True,
        embed_scale=True,
    ),
    "gemma3": FamilyTraits(
        "gemma3/modeling_gemma3.py",
        norm="rms_gemma",
        qk_norm="rms_gemma",
        activation="gelu_tanh",
        post_norms=True,
        embed_scale=True,
    ),
    "olmo2": FamilyTraits(
        "olmo2/modeling_olmo2.py",
        norm="rms_fp32_product",
        qk_norm="rms_fp32_product",
        qk_scope="whole",
        pre_norms=False,
        post_norms=True,
    ),
    "gpt2": FamilyTraits("gpt2/modeling_gpt2.py", norm="layernorm", activation="gelu_new"),
    "gpt_neox": FamilyTraits(
        "gpt_neox/modeling_gpt_neox.py", norm="layernorm", activation="gelu", rotary_fraction=0.25
    ),
    "falcon": FamilyTraits(
        "falcon/modeling_falcon.py", norm="layernorm", activation="gelu", explicit_mask=True
    ),
    "starcoder2": FamilyTraits(
        "starcoder2/modeling_starcoder2.py", norm="layernorm", activation="gelu_tanh"
    ),
    "stablelm": FamilyTraits(
        "stablelm/modeling_stablelm.py",
        norm="layernorm",
        qk_norm="layernorm",
        rotary_fraction=0.25,
    ),
    "cohere": FamilyTraits(
        "cohere/modeling_cohere.py", norm="layernorm_fp32", qk_norm="layernorm_fp32"
    ),
    "cohere2": FamilyTraits("cohere2/modeling_cohere2.py", norm="layernorm_fp32"),
    "mixtral": FamilyTraits("mixtral/modeling_mixtral.py", topk_renorm=True),
    "qwen3_moe": FamilyTraits("qwen3_moe/modeling_qwen3_moe.py", routing_dtype_compute=True),
    "qwen2_moe": FamilyTraits("qwen2_moe/modeling_qwen2_moe.py", routing_dtype_compute=True),
    "granitemoe": FamilyTraits("granitemoe/modeling_granitemoe.py", router="granite"),
    "phimoe": FamilyTraits("phimoe/modeling_phimoe.py", norm="layernorm", router="sparsemixer"),
    "deepseek_v2": FamilyTraits(
        "deepseek_v2/modeling_deepseek_v2.py",
        router="softmax_group",
        router_fp32_input=True,
        shared_after_routed=True,
    ),
    "deepseek_v3": FamilyTraits(
        "deepseek_v3/modeling_deepseek_v3.py",
        router="sigmoid_group",
        router_fp32_input=True,
        shared_after_routed=True,
    ),
    "llama4": FamilyTraits("llama4/modeling_llama4.py", qk_scope="l2", router="llama4"),
}


def traits_of(arch: ArchitectureSpec) -> FamilyTraits:
    """The implementation facts of the architecture's family."""
    return _TRAITS[arch.family]


def source_of(arch: ArchitectureSpec) -> str:
    """The sources.json key of the family's modeling code."""
    return _SOURCE_KEYS[arch.family]


_SOURCE_KEYS: dict[str, str] = {family: t.source_key for family, t in _TRAITS.items()}
"""Each family's :attr:`FamilyTraits.source_key`, worked out once (every make-up of
every estimate names its activation rows' source)."""
