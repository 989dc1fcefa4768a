"""The Method section: what is trained, with which optimizer and number formats."""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import (
    Field,
    model_validator,
)

from engine.sections.base import EvolvedSection, Section

Dtype = Literal["fp32", "bf16", "fp16"]
AUTO = "auto"
"""A field left at ``auto`` takes the training stack's default (``stack.name``), resolved
in one place, :func:`engine.stacks.defaults.resolve_stack_defaults`."""

LoraTarget = Literal["q", "k", "v", "o", "qkv", "gate", "up", "gate_up", "down", "lm_head"]
LoraImplementation = Literal["peft", "litgpt"]


class LoraSection(EvolvedSection):
    """LoRA adapters (Hu et al. 2021) as PEFT builds them."""

    rank: int = Field(default=16, ge=1, le=65536, description="Adapter rank r (count).")
    alpha: float = Field(default=32.0, gt=0, le=1e6, description="Scaling numerator alpha.")
    dropout: float = Field(default=0.0, ge=0.0, lt=1.0, description="Adapter dropout p.")
    targets: tuple[LoraTarget, ...] = Field(
        default=("q", "k", "v", "o"),
        min_length=1,
        description="Projection roles that get adapters (default: attention q, k, v, o).",
    )
    adapter_dtype: Dtype = Field(
        default="fp32",
        description="Adapter weights' dtype; PEFT keeps them fp32 over a bf16 base "
        "(autocast_adapter_dtype=True, measured).",
    )
    implementation: LoraImplementation = Field(
        default="peft",
        description="Whose LoRA code runs: peft wraps each targeted projection; litgpt "
        "is LitGPT's LoRAQKVLinear (litgpt/lora.py): the q / k / v targets are flags of "
        "one adapter on the model's fused qkv linear (one dropout, A of r per enabled "
        "part), whose zero_pad index_copy keeps the adapter output for backward when "
        "not all three are enabled; the model runs its fused qkv.",
    )

    LATER_INPUTS: ClassVar[dict[str, Any]] = {"implementation": "peft"}


QuantStorage = Literal["auto", "uint8", "bf16", "fp16", "fp32"]


class QloraSection(EvolvedSection):
    """4-bit NormalFloat base weights (Dettmers et al. 2023)."""

    block_size: int = Field(default=64, ge=16, le=4096, description="Elements per absmax block.")
    double_quant: bool = Field(
        default=True, description="Quantize the absmax constants (8-bit, block 256)."
    )
    compute_dtype: Dtype = Field(default="bf16", description="Dequantized compute dtype.")
    upcast_non_quantized: bool = Field(
        default=True,
        description="Keep norms, embeddings and lm_head in fp32, as "
        "prepare_model_for_kbit_training does.",
    )
    quantize_lm_head: bool = Field(
        default=False,
        description="Quantize the output projection (lm_head) too, as Lightning Fabric's "
        "BitsandbytesPrecision does (LitGPT: it swaps every torch.nn.Linear); "
        "transformers keeps it in 16-bit (get_keys_to_not_convert).",
    )
    nf4_impl: Literal["bitsandbytes", "torchao"] = Field(
        default="bitsandbytes",
        description="The library that holds the 4-bit weights: bitsandbytes (transformers / "
        "PEFT, LitGPT, Answer.AI) or torchao's NF4Tensor (torchtune's QLoRA: int8 block "
        "scalers, per-256-block factors and the lookup table in the weight's dtype; its "
        "linear_nf4 dequantizes the whole weight in eager code through int64 indices, "
        "one fused 16-bit copy under torch.compile).",
    )
    quant_storage: QuantStorage = Field(
        default="auto",
        description="dtype the packed 4-bit data is stored in (bnb_4bit_quant_storage). "
        "A floating dtype makes it a parameter ZeRO-3 partitions and FSDP shards (still "
        "0.5 B per weight); uint8 keeps it replicated (FSDP2 ignored params). auto = the "
        "stack's: bf16 where the strategy shards parameters (peft's FSDP / ZeRO-3 "
        "recipes), uint8 otherwise (bitsandbytes' default).",
    )
    quantized_from: Literal["any", "bf16", "fp16", "fp32"] = Field(
        default="any",
        description="dtype the weights were quantized from (quant_state.dtype), which "
        "dequantize_4bit returns before the cast to the compute dtype: any = unknown, "
        "from the compute dtype up to fp32; fp16 = Lightning Fabric's "
        "BitsandbytesPrecision (LitGPT: _Linear4bit.quantize casts to torch.half).",
    )

    LATER_INPUTS: ClassVar[dict[str, Any]] = {
        "nf4_impl": "bitsandbytes",
        "quantized_from": "any",
    }


class CustomTrainableSection(Section):
    """Train a chosen subset: by roles, or a raw parameter count."""

    roles: tuple[str, ...] = Field(
        default=(), description="Tensor roles that are trainable (empty: use count)."
    )
    count: int | None = Field(
        default=None, ge=0, le=10**14, description="Trainable parameters (count), if set."
    )


OptimizerName = Literal["adamw", "adam8bit", "sgd", "sgd_momentum", "adafactor", "lion", "custom"]


class OptimizerSection(EvolvedSection):
    """The optimizer and how its step is implemented."""

    name: OptimizerName = Field(default="adamw", description="Optimizer algorithm.")
    implementation: Literal["auto", "foreach", "fused", "for_loop"] = Field(
        default="auto",
        description="Step implementation; auto = the stack's: foreach for a plain PyTorch "
        "script (torch.optim's default; one extra state-dtype copy of the parameters), fused "
        "for HF Trainer (adamw_torch_fused), DeepSpeed (FusedAdam), torchtitan and "
        "Megatron-Core (TE/Apex FusedAdam).",
    )
    in_backward: bool = Field(
        default=False,
        description="The optimizer steps each parameter inside backward and frees its "
        "gradient (torchtune optimizer_in_bwd: one optimizer per parameter, run by a "
        "post-accumulate-grad hook); needs grad_accum 1.",
    )
    paged: bool = Field(
        default=False,
        description="bitsandbytes paged optimizer (paged_adamw_8bit / paged_adamw_32bit): "
        "the state lives in CUDA unified memory and pages to host under pressure.",
    )
    adam8bit_library: Literal["bitsandbytes", "torchao"] = Field(
        default="bitsandbytes",
        description="Whose 8-bit AdamW (name = adam8bit): bitsandbytes (AdamW8bit: one "
        "CUDA kernel updates each tensor in place; tensors under 4096 elements keep fp32 "
        "state) or torchao (low_bit_optim AdamW8bit, torchtune's: each parameter's step "
        "is torch.compile'd from fp32 upcasts; small tensors keep state in the "
        "parameter's dtype).",
    )
    custom_bytes_per_param: float = Field(
        default=8.0,
        ge=0.0,
        le=64.0,
        description="Optimizer state bytes per trainable parameter when name = custom.",
    )
    precision_aware: bool = Field(
        default=False,
        description="Megatron-Core --use-precision-aware-optimizer: TE FusedAdam reads the "
        "16-bit main grads in place (decoupled_grad), so no fp32 main-grad shard is made "
        "for the step (off: Megatron's default).",
    )

    LATER_INPUTS: ClassVar[dict[str, Any]] = {"adam8bit_library": "bitsandbytes"}


ConcretePolicy = Literal["fp32", "amp_master", "autocast", "pure_16bit"]
PrecisionPolicy = Literal["auto", "fp32", "amp_master", "autocast", "pure_16bit"]


class PrecisionSection(Section):
    """Number formats of parameters, gradients, master copy and optimizer state.

    ``amp_master``: 16-bit working weights plus an fp32 master copy (DeepSpeed, Megatron).
    ``autocast``: fp32 parameters are the master (FSDP2 MixedPrecisionPolicy — the sharded
    fp32 parameter *is* the master — or torch.autocast); compute casts to
    ``compute_dtype``. ``pure_16bit``: all 16-bit. ``auto``: the training stack's
    (DeepSpeed and Megatron-Core amp_master, FSDP autocast, …; see ``stack.name``).
    """

    policy: PrecisionPolicy = Field(
        default="auto",
        description="Which copies exist in which format; auto = the stack's default "
        "(DeepSpeed bf16.enabled and Megatron --bf16: amp_master; FSDP MixedPrecision: "
        "autocast; HF Trainer without FSDP: the dtype the model was loaded in).",
    )
    compute_dtype: Dtype = Field(default="bf16", description="Forward/backward dtype.")
    grad_dtype: Literal["auto", "fp32", "bf16", "fp16"] = Field(
        default="auto",
        description="Gradient dtype under amp_master (fp32 main grads in Megatron, the model "
        "dtype in DeepSpeed unless data_types.grad_accum_dtype says otherwise); under the "
        "other policies gradients keep each parameter's dtype and this is the dtype FSDP "
        "reduces in (reduce_dtype). auto = the stack's default.",
    )
    optimizer_state_dtype: Dtype = Field(
        default="fp32",
        description="Optimizer moments' dtype under amp_master (fp32 by default; Megatron "
        "can keep bf16). Other policies follow each parameter's dtype, as torch.optim does.",
    )
    loss_scaling: bool = Field(default=False, description="fp16 dynamic loss scaling.")
    float8: Literal["none", "tensorwise", "rowwise"] = Field(
        default="none",
        description="Float8 training of the decoder layers' linears (torchao Float8Linear, "
        "torchtitan --model.converters float8, dynamic scaling): none = 16-bit matmuls.",
    )
    float8_all_gather: bool = Field(
        default=False,
        description="FSDP2 all-gathers the float8 linears' weights already cast to fp8 "
        "(torchtitan --float8.enable_fsdp_float8_all_gather).",
    )


ConcreteRecompute = Literal["none", "selective", "full", "every_k", "offload"]
RecomputePolicy = Literal["auto", "none", "selective", "full", "every_k", "offload"]
RecomputeModule = Literal[
    "core_attn", "moe_act", "layernorm", "mla_up_proj", "mlp", "moe", "shared_experts"
]


class RecomputeSection(Section):
    """Activation checkpointing (recomputation) policy."""

    policy: RecomputePolicy = Field(
        default="auto",
        description="auto = the stack's default: full for QLoRA (peft "
        "prepare_model_for_kbit_training turns gradient checkpointing on), selective for "
        "torchtitan (SelectiveAC), none otherwise.",
    )
    every_k: int = Field(
        default=2, ge=1, le=10_000, description="With every_k: checkpoint one layer in k."
    )
    modules: tuple[RecomputeModule, ...] = Field(
        default=("core_attn",),
        description="Megatron-Core --recompute-modules under selective recompute (its "
        "default core_attn: the attention core; layernorm: the norms' outputs; mlp: the "
        "dense MLP). The megatron profile drops what each recomputes; the others keep "
        "selective = core_attn.",
    )
    offload_activations: bool = Field(
        default=False,
        description="torchtune enable_activation_offloading: every saved tensor (under "
        "checkpointing, the layers' inputs) goes to pinned host memory on a side stream, the "
        "last few staying stashed on the GPU, and comes back when its layer's backward "
        "unpacks it; the output layer's input stays.",
    )


MethodKind = Literal["full", "lora", "qlora", "custom"]


class MethodSection(Section):
    """Training method: full, LoRA, QLoRA or a custom trainable subset."""

    kind: MethodKind = Field(default="full")
    lora: LoraSection = Field(default_factory=LoraSection)
    qlora: QloraSection = Field(default_factory=QloraSection)
    custom: CustomTrainableSection = Field(default_factory=CustomTrainableSection)
    optimizer: OptimizerSection = Field(default_factory=OptimizerSection)
    precision: PrecisionSection = Field(default_factory=PrecisionSection)
    recompute: RecomputeSection = Field(default_factory=RecomputeSection)
    dropout: float | None = Field(
        default=None,
        ge=0.0,
        lt=1.0,
        description="Hidden and attention dropout p of the training code's model (Megatron "
        "--hidden-dropout / --attention-dropout): p > 0 keeps a 1-byte mask per dropout for "
        "backward. None = the stack's: 0.1 in Megatron-Core (its arguments' default), the "
        "model family's otherwise (0.1 for GPT-2, 0 for Llama-style models).",
    )

    @model_validator(mode="after")
    def _consistent(self) -> MethodSection:
        if self.precision.policy == "fp32" and self.precision.compute_dtype != "fp32":
            raise ValueError("precision.policy fp32 needs precision.compute_dtype fp32")
        if self.precision.loss_scaling and self.precision.compute_dtype != "fp16":
            raise ValueError("precision.loss_scaling applies only to fp16 compute")
        return self


class BatchSection(Section):
    """Batch geometry of one optimizer step."""

    seq_len: int = Field(
        default=4096, ge=1, le=10_000_000, description="Sequence length s (tokens)."
    )
    micro_batch: int = Field(
        default=1, ge=1, le=1_000_000, description="Micro-batch b (sequences per rank per forward)."
    )
    grad_accum: int = Field(
        default=1,
        ge=1,
        le=1_000_000,
        description="Gradient accumulation steps (micro-batches per optimizer step per rank).",
    )
    global_batch: int | None = Field(
        default=None,
        ge=1,
        le=100_000_000,
        description="Global batch (sequences per step); None = micro_batch × grad_accum × DP.",
    )
    hold_fixed: Literal["micro_batch", "global_batch"] = Field(
        default="micro_batch",
        description="When the layout changes, keep the micro-batch or the global batch.",
    )
