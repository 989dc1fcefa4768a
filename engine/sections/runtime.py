"""The Runtime section: framework, kernels and the memory outside PyTorch's tensors."""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import (
    Field,
    field_validator,
)

from engine.sections.base import ByteRange, EvolvedSection, FractionRange, Section
from engine.units import GiB, MiB


class RuntimeSection(EvolvedSection):
    """What the software stack adds beyond the model's own tensors."""

    framework_version: str = Field(
        default="torch 2.13",
        max_length=100,
        description="The torch build, 'torch X.Y[.Z][+cuNNN]': the cuBLAS workspace rows "
        "follow it (torch 2.2-2.3 built for CUDA >= 12.2 leave the workspace to cuBLAS).",
    )
    bitsandbytes_version: str = Field(
        default="0.45.0",
        pattern=r"^\d+\.\d+(\.\d+)?$",
        max_length=20,
        description="bitsandbytes version the QLoRA rows follow: before 0.43.2 each 4-bit "
        "linear kept its input for backward (MatMul4Bit ctx.tensors = (A, B)).",
    )
    transformers_version: str = Field(
        default="5.24.0",
        pattern=r"^\d+\.\d+(\.\d+)?$",
        max_length=20,
        description="transformers version the hf-transformers loss rows follow: before 4.49 "
        "ForCausalLMLoss shifted the fp32 logits with logits[..., :-1, :].contiguous() "
        "(one more fp32 copy in the loss's forward; removed by #35646).",
    )
    torchtitan_version: str = Field(
        default="0.3.0",
        pattern=r"^\d+\.\d+(\.\d+)?$",
        max_length=20,
        description="torchtitan version the torchtitan rows follow (default: the 0.3.0 the "
        "tracer runs): before 0.2.0 apply_fsdp wraps the whole model as the root FSDP2 unit "
        "(embedding, final norm and output, resharded after forward) and keeps the last "
        "block gathered after forward; from 0.2.0 (#1094) the embedding and [norm, output] "
        "are units of their own.",
    )
    activation_profile: Literal["auto", "hf-transformers", "megatron", "torchtitan"] = Field(
        default="auto",
        description="Which implementation's saved tensors the activation model counts; "
        "auto = the stack's (megatron under Megatron-Core, torchtitan under torchtitan, "
        "hf-transformers otherwise).",
    )
    attention: Literal["sdpa_flash", "sdpa_mem_efficient", "flash_attn", "flex", "eager"] = Field(
        default="sdpa_flash",
        description="The attention kernel: flex = torch's flex_attention (torchtitan 0.3's "
        "default attn_backend), which also keeps an fp32 row max per head and token.",
    )
    kv_expanded: bool = Field(
        default=False,
        description="The model code copies K and V out to every query head before the "
        "attention call, so the kernel keeps those copies (torchtune 0.4's "
        "MultiHeadAttention: expand + flatten; LitGPT's CausalSelfAttention: expand + "
        "reshape); off = transformers' enable_gqa / repeat_kv rules.",
    )
    previous_output_kept: bool = Field(
        default=False,
        description="The training loop keeps the previous micro-batch's output, and the "
        "autograd graph it references, until the next forward returns (LitGPT's finetune "
        "fit(): logits = model(...) is never deleted): the old logits, and what custom "
        "autograd functions hold as ctx attributes (bitsandbytes before 0.43.2: every "
        "4-bit linear's input), stay live through the next forward.",
    )
    loss: Literal["standard", "chunked", "fused"] = Field(
        default="standard",
        description="Cross-entropy: HF standard (fp32 logits), chunked, or fused (no full logits).",
    )
    loss_chunk_tokens: int = Field(default=1024, ge=1, le=10**8)
    loss_impl: Literal[
        "auto", "eager", "compiled", "chunked", "chunked_output", "fused", "vocab_parallel"
    ] = Field(
        default="auto",
        description="The cross-entropy the stack runs: eager (fp32 upcast, log-probs kept), "
        "compiled (torch.compile: bf16 logits kept, no fp32 T × V copies), chunked, "
        "chunked_output (torchtune's CEWithChunkedOutputLoss: every chunk's logits, the "
        "fp32 work per chunk, compiled under workload.torch_compile), fused, "
        "vocab_parallel (Megatron); auto = runtime.loss when set to chunked or fused, else "
        "the stack's (torchtitan: chunked; Megatron-Core: vocab_parallel; eager otherwise).",
    )
    zero_grad: Literal["auto", "set_to_none", "zero_fill"] = Field(
        default="auto",
        description="What the step's zero_grad does: set_to_none frees the gradients until "
        "backward makes them; zero_fill (set_to_none=False) keeps them allocated through the "
        "next forward; auto = the stack's (torchtitan: zero_fill, else set_to_none).",
    )
    qkv_fusion: Literal["auto", "as_model", "fused"] = Field(
        default="auto",
        description="Whether the stack's model code runs q / k / v as one projection: "
        "fused = one wqkv weight per layer whatever the checkpoint's layout (one optimizer "
        "tensor, one cached mm under torchtitan's per-op SAC); as_model = the "
        "architecture's fused_qkv; auto = the stack's (torchtitan 0.3: fused, else as_model).",
    )
    rope_cache: Literal["auto", "per_layer", "per_model", "torchtune"] = Field(
        default="auto",
        description="The model code's RoPE cache buffers: per_layer = torchtitan 0.3's, one "
        "(seq_len positions) per attention layer (models/common/rope.py); per_model = one "
        "freqs_cis of 2 × seq_len positions on the model (torchtitan's 2024–25 llama code); "
        "torchtune = torchtune's model builders: one fp32 cos / sin cache of the model's "
        "max_position positions shared by every layer (Llama3ScaledRoPE, in place of "
        "transformers' inv_freq); auto = per_layer under torchtitan, else transformers' "
        "inv_freq only (there is no torchtune stack: a torchtune plan names it).",
    )
    logits_fp32_upcast: bool = Field(
        default=True, description="HF causal-LM loss upcasts logits to fp32 (transformers #30860)."
    )
    kept_logits: Literal["none", "fp32", "compute"] = Field(
        default="none",
        description="Logits the training loop keeps through backward by holding the model "
        "output (under the eager loss): none (HF Trainer's compute_loss returns the loss "
        "only); fp32 (a loop that holds `output` until after the step, as Answer.AI's "
        "fsdp_qlora train.py, under transformers <= 4.44, whose LlamaForCausalLM upcasts "
        "with logits.float() in forward and copies logits[..., :-1, :].contiguous() for "
        "the loss); compute (such a loop under transformers >= 4.45: the 16-bit logits). "
        "Under the chunked-output loss, fp32 is LitGPT's fit holding Lightning Fabric's "
        "output, whose chunks convert_output casts to fp32 (the loss then runs on them).",
    )
    activation_band: FractionRange = Field(
        default=FractionRange(low=0.98, high=1.05),
        description="Multiplier band on the counted activations (implementation variance).",
    )
    cuda_context_bytes: ByteRange = Field(
        default=ByteRange(low=int(0.3 * GiB), high=int(0.65 * GiB)),
        description="CUDA context per process (pytorch PR #86509: 0.3–0.65 GiB).",
    )
    nccl_bytes_per_communicator: ByteRange | None = Field(
        default=None,
        description="NCCL buffers per communicator (bytes); None = by accelerator "
        "generation: 0.5–0.7 GB on Ampere (NVIDIA/nccl #964), 0.5–2 GB on Hopper and later, "
        "whose extra channels and NVLS buffers raise it (NVIDIA/nccl #864, #986).",
    )
    cublas_workspace_bytes: ByteRange | None = Field(
        default=None,
        description="cuBLAS(Lt) workspace of one (handle, stream), which PyTorch allocates "
        "through its caching allocator (CublasHandlePool.cpp setWorkspaceForHandle), two "
        "in a training step (the forward's thread and autograd's device thread); None = "
        "torch's default for runtime.framework_version and the card: 8,519,680 B "
        "(:4096:2:16:8), 32 MiB on Hopper (and Blackwell from torch 2.12), + 1 MiB "
        "cuBLASLt before 2.12 (engine/stacks/blas_workspace.py).",
    )
    reserve_model: Literal["allocator", "fraction"] = Field(
        default="allocator",
        description="How reserved − allocated is worked out: 'allocator' from the caching "
        "allocator's rules (fragmentation of the transient bytes plus the side-stream "
        "pools; engine/allocator/reserve.py), 'fraction' the pessimistic share of the whole "
        "allocated peak (runtime.allocator_reserve), whose reserve all counts toward fit.",
    )
    allocator_reserve: FractionRange = Field(
        default=FractionRange(low=0.11, high=0.36),
        description="Under reserve_model 'fraction' only: reserved minus allocated as a "
        "fraction of allocated, 11 % (pytorch #40989) to 36 % (torchtitan #165).",
    )
    fragmentation: FractionRange = Field(
        default=FractionRange(low=0.05, high=0.09),
        description="Compute-stream fragmentation as a share of the transient allocated "
        "bytes (allocated − the persistent part): 0.077 in a Megatron-LM 1.7B run (50,277 MB "
        "allocated, 53,386 MB reserved), 0.059 between torchtitan #165's two runs.",
    )
    side_stream_cache: FractionRange = Field(
        default=FractionRange(low=1.55, high=1.74),
        description="Side-stream pools (FSDP / DeepSpeed all-gather and reduce-scatter "
        "streams) as a multiple of the gathered units and gradient buckets: each stream "
        "reuses only its own freed blocks (calibrated on torchtitan #165).",
    )
    expandable_segments: bool | None = Field(
        default=None,
        description="PYTORCH_CUDA_ALLOC_CONF expandable_segments; None = the stack's "
        "(torchtitan sets it True, others leave PyTorch's default False). On, free pages are "
        "unmapped before an out-of-memory, so fragmentation no longer decides fit.",
    )
    max_split_size_mb: int | None = Field(
        default=None,
        ge=1,
        le=10**7,
        description="PYTORCH_CUDA_ALLOC_CONF max_split_size_mb: blocks this large are never "
        "split (None: no limit, PyTorch's default). Read by the allocator simulator.",
    )
    allocation_granularity_bytes: int = Field(
        default=512,
        ge=1,
        le=2**30,
        description="CUDA caching allocator rounds each allocation up to 512 bytes.",
    )

    @field_validator("cublas_workspace_bytes", mode="before")
    @classmethod
    def _legacy_auto(cls, value: Any) -> Any:
        """The band every plan held before the field followed torch and the card (8-32
        MiB, one handle outside PyTorch) means auto: saved plans follow the new rule."""
        band = value.model_dump() if isinstance(value, ByteRange) else value
        if isinstance(band, dict) and (band.get("low"), band.get("high")) == _LEGACY:
            return None
        return value

    LATER_INPUTS: ClassVar[dict[str, Any]] = {"previous_output_kept": False}

    def _canonical_extra(self, data: dict[str, Any]) -> None:
        """Write an auto cuBLAS workspace as the old default band, so plans saved
        before it followed torch and the card keep their config hash."""
        if self.cublas_workspace_bytes is None:
            data["cublas_workspace_bytes"] = {"low": _LEGACY[0], "high": _LEGACY[1]}


_LEGACY = (8 * MiB, 32 * MiB)
"""``cublas_workspace_bytes``' default before it was auto (one handle, outside PyTorch)."""


class PolicySection(Section):
    """How the verdict and counts are reported."""

    headroom_percent: float = Field(
        default=0.0,
        ge=0.0,
        le=90.0,
        description="The user's own margin (%) below the capacity: the estimate's range "
        "already covers what it knows to be uncertain, so none is stacked on by default.",
    )
    rounding: Literal["node", "gpu", "whole_node"] = Field(
        default="node",
        description="Round procurement counts to whole nodes (a single GPU or a partial node "
        "below one node), to GPUs, or always to whole nodes (a system sold whole, e.g. a DGX).",
    )
    units: Literal["gb", "gib", "both"] = Field(default="both")
    max_gpus: int = Field(default=16_384, ge=1, le=10_000_000, description="Layout search bound.")
    max_pp: int = Field(
        default=16,
        ge=1,
        le=1024,
        description="Deepest pipeline the layout search proposes (the plan's own PP is never "
        "refused by it). Default 16: DeepSeek-V3 (technical report §3.2) and Llama 3 405B "
        "(Llama 3 paper §3.3.2, Table 4) train with 16-way PP; a deeper pipeline adds bubble and "
        "point-to-point hops for the memory it saves. Raise it to let the search go deeper.",
    )
