"""The rules by which a training stack decides each ``auto`` field (what
:func:`engine.stacks.defaults.resolve_stack_defaults` applies): one function per field,
each given the stack, the strategy and the plan, returning the value, why, and its source.

The rules follow the frameworks' code (file + function in each source key):

- precision: DeepSpeed ``bf16.enabled`` casts the module to bf16 and keeps the fp32
  master in the ZeRO optimizer; Megatron-Core ``--bf16`` the same with fp32 main grads;
  FSDP's MixedPrecision keeps fp32 parameters (accelerate upcasts trainable ones); the
  HF Trainer without FSDP trains in the dtype the model was loaded in (transformers 5
  loads ``dtype="auto"``: bf16 for Llama), and peft keeps adapters fp32.
- gradients: DeepSpeed's follow the model dtype (``get_data_types``), Megatron's main
  grads are fp32, FSDP reduces in ``reduce_dtype`` (fp32 in torchtitan and the measured
  script, the mixed-precision dtype in accelerate).
- optimizer step: fused everywhere but a plain script (torch.optim's foreach default).
- recomputation: peft's ``prepare_model_for_kbit_training`` turns checkpointing on;
  torchtitan's default is SelectiveAC, per-op (its own activation profile counts it).
- the loss: torchtitan's llama3 configs run ``ChunkedLossWrapper`` (eager inside, as
  ``compile.enable`` is off by default), Megatron-Core its vocab-parallel cross-entropy,
  everything else the eager ``cross_entropy`` of an fp32 upcast; torchtitan's train step
  zeroes gradients with ``set_to_none=False``.
- QLoRA's 4-bit storage: bfloat16 where the strategy shards parameters (peft's FSDP /
  ZeRO-3 recipes), bitsandbytes' uint8 otherwise.
- model load: zero.Init under ZeRO-3, a full copy per rank under ZeRO-1/2 and the HF
  Trainer (``from_pretrained`` on every rank), meta-device construction otherwise.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from engine.plan import Plan
from engine.sections.stack import ConcreteStack
from engine.stacks.accelerators import nccl_band
from engine.stacks.blas_workspace import workspace_band
from engine.stacks.catalog import stack_info
from engine.stacks.families import StrategyRule
from engine.stacks.titan_versions import qkv_fusion, rope_cache


@dataclass(frozen=True, slots=True)
class Context:
    """What a default may depend on: the stack, the strategy and the method."""

    stack: ConcreteStack
    rule: StrategyRule
    plan: Plan

    @property
    def kind(self) -> str:
        return self.plan.method.kind

    @property
    def compute(self) -> str:
        return self.plan.method.precision.compute_dtype


Choice = tuple[Any, str, str]
"""(value, why, source key)."""


def _policy(c: Context) -> Choice:
    if c.stack == "megatron_core":
        return "amp_master", "--bf16: bf16 params, fp32 master in the optimizer", "megatron-bf16"
    if c.rule.family == "deepspeed":
        return (
            "amp_master",
            "bf16.enabled casts the module to bf16; the ZeRO optimizer keeps the fp32 master",
            "deepspeed-bf16",
        )
    if c.stack == "hf_trainer":
        return _hf_policy(c)
    if c.stack == "torchtitan":
        return (
            "autocast",
            "fp32 parameters; FSDP2 MixedPrecisionPolicy(param_dtype=bfloat16) or autocast",
            "stack-torchtitan",
        )
    return "autocast", "fp32 parameters, compute cast to the compute dtype", "stack-pytorch"


def _hf_policy(c: Context) -> Choice:
    """The HF Trainer trains in the dtype from_pretrained loaded (transformers 5:
    ``dtype="auto"``, bf16 for Llama) unless accelerate's FSDP path upcasts the trainable
    parameters to fp32, or peft's kbit preparation upcasts the non-4-bit ones."""
    if c.kind == "qlora":
        return (
            "autocast",
            "prepare_model_for_kbit_training upcasts non-4-bit parameters to fp32; "
            "the Trainer's bf16 runs torch.autocast",
            "peft-kbit",
        )
    if c.kind == "lora":
        return (
            "pure_16bit",
            "the base stays in the bf16 it was loaded in; peft keeps the adapters fp32",
            "stack-hf-trainer",
        )
    if c.rule.fsdp:
        return (
            "autocast",
            "accelerate upcasts trainable parameters to fp32 under mixed precision",
            "stack-hf-trainer",
        )
    return (
        "pure_16bit",
        "from_pretrained loads bf16 (dtype='auto'); outside FSDP nothing upcasts it",
        "stack-hf-trainer",
    )


def _grad_dtype(c: Context) -> Choice:
    if c.stack == "megatron_core":
        return (
            "fp32",
            "--bf16 forces fp32 main grads (accumulate_allreduce_grads_in_fp32)",
            "megatron-bf16",
        )
    if c.rule.family == "deepspeed":
        return (
            c.compute,
            "gradients take the model dtype unless data_types.grad_accum_dtype is set",
            "deepspeed-bf16",
        )
    if c.stack == "hf_trainer":
        return (
            c.compute,
            "accelerate's MixedPrecisionPolicy reduces in the mixed-precision dtype",
            "stack-hf-trainer",
        )
    if c.stack == "torchtitan":
        return "fp32", "mixed_precision_reduce float32", "stack-torchtitan"
    return "fp32", "FSDP reduce_dtype fp32", "stack-pytorch"


def _implementation(c: Context) -> Choice:
    adam = c.plan.method.optimizer.name == "adamw"
    if c.stack == "pytorch" and c.rule.fsdp and c.plan.offload.params != "none":
        return (
            "for_loop",
            "the offloaded step runs on the CPU, where torch.optim's default is the for-loop "
            "(foreach only when every tensor is on CUDA)",
            "torch-adamw",
        )
    if c.stack == "megatron_core":
        return "fused", "TE / Apex FusedAdam (and FusedSGD) update in place", "megatron-fused-adam"
    if c.stack == "torchtitan":
        return "fused", "optimizer implementation 'fused' by default", "stack-torchtitan"
    if adam and c.rule.family == "deepspeed":
        return (
            "fused",
            "FusedAdam (DeepSpeedCPUAdam with ZeRO-Offload), or the HF Trainer's fused AdamW",
            "stack-deepspeed",
        )
    if adam and c.stack == "hf_trainer":
        return "fused", "optim defaults to adamw_torch_fused (torch ≥ 2.8)", "stack-hf-trainer"
    return "foreach", "torch.optim's default for CUDA tensors", "torch-adamw"


def _recompute(c: Context) -> Choice:
    if c.kind == "qlora" and stack_info(c.stack).peft:
        return (
            "full",
            "prepare_model_for_kbit_training(use_gradient_checkpointing=True) checkpoints "
            "every decoder layer",
            "peft-kbit",
        )
    if c.stack == "torchtitan":
        return (
            "selective",
            "SelectiveAC, per-op: the outputs of attention and of every second matmul kept, "
            "the rest recomputed (the torchtitan profile's selective)",
            "torchtitan-selective-ac",
        )
    return "none", "no activation checkpointing by default", stack_info(c.stack).source


def _model_init(c: Context) -> Choice:
    if c.rule.family == "deepspeed" and c.rule.zero_stage == 3:
        return (
            "zero_init",
            "ZeRO-3 builds the model under deepspeed.zero.Init (accelerate zero3_init_flag, "
            "HfDeepSpeedConfig in from_pretrained)",
            "deepspeed-model-load",
        )
    if c.rule.family == "deepspeed" or (c.stack == "hf_trainer" and c.kind != "qlora"):
        return (
            "full_copy_per_rank",
            "from_pretrained materialises the whole model on every rank's host "
            "(no zero.Init below ZeRO-3; accelerate cpu_ram_efficient_loading False)",
            "deepspeed-model-load",
        )
    if c.kind == "qlora":
        return (
            "meta",
            "a quantized from_pretrained loads tensor by tensor onto its device",
            "peft-kbit",
        )
    if c.stack == "torchtitan":
        return (
            "meta",
            "the model is built on the meta device, then loaded sharded",
            ("stack-torchtitan"),
        )
    if c.stack == "megatron_core":
        return (
            "meta",
            "each rank builds its own TP / PP shard and loads it",
            ("stack-megatron-core"),
        )
    return "meta", "meta-device construction, sharded load", "stack-pytorch"


def _profile(c: Context) -> Choice:
    if c.stack == "megatron_core":
        return "megatron", "Megatron-Core's own GPT model", "stack-megatron-core"
    if c.stack == "torchtitan":
        return "torchtitan", "torchtitan's own decoder block", "torchtitan-llama3-model"
    return "hf-transformers", "HF transformers modelling code", "hf-transformers-llama"


def _loss_impl(c: Context) -> Choice:
    """``runtime.loss`` set to chunked or fused says what the job runs; else the stack's."""
    asked = c.plan.runtime.loss
    if asked != "standard":
        return asked, f"runtime.loss {asked}", "memory-model"
    if c.stack == "torchtitan":
        return (
            "chunked",
            "the llama3 configs run ChunkedLossWrapper (8 chunks; compile off by default)",
            "torchtitan-chunked-loss",
        )
    if c.stack == "megatron_core":
        return "vocab_parallel", "vocab-parallel cross-entropy", "megatron-vocab-parallel"
    return "eager", "cross_entropy on the fp32 upcast of the logits", "hf-causal-lm-loss"


def _zero_grad(c: Context) -> Choice:
    if c.stack == "torchtitan":
        return (
            "zero_fill",
            "train_step calls zero_grad(set_to_none=False): gradients stay allocated",
            "torchtitan-zero-grad",
        )
    return "set_to_none", "torch.optim zero_grad's default set_to_none=True", "torch-adamw"


def _tp_style(c: Context) -> Choice:
    if c.stack in ("megatron_core", "torchtitan"):
        return (
            "vocab_parallel",
            "VocabParallelEmbedding and vocab-parallel cross-entropy (loss_parallel)",
            "megatron-vocab-parallel" if c.stack == "megatron_core" else "stack-torchtitan",
        )
    return (
        "replicated_embedding",
        "transformers tp_plan: lm_head colwise_rep (gathered logits), embedding whole",
        "hf-tp-plan",
    )


def _expert_storage(c: Context) -> Choice:
    if c.stack == "megatron_core":
        return (
            "per_expert",
            "TEGroupedMLP holds one weight per local expert (linear_fc1.weight0, weight1, …)",
            "megatron-grouped-mlp",
        )
    if c.stack == "torchtitan":
        return (
            "stacked",
            "GroupedExperts holds w1, w2, w3 as (experts, …) parameters",
            "torchtitan-grouped-experts",
        )
    return (
        "fused_gate_up",
        "transformers 5 <Family>Experts: gate_up_proj (E, 2I, h) and down_proj (E, h, I)",
        "hf-fused-experts",
    )


def _quant_storage(c: Context) -> Choice:
    """bitsandbytes stores the packed 4-bit data as uint8 unless ``bnb_4bit_quant_storage``
    says otherwise; peft's multi-GPU QLoRA recipes (docs/source/accelerate/deepspeed.md
    and fsdp.md) set bfloat16 so that ZeRO-3 partitions and FSDP shards it: FSDP1 cannot
    flatten a uint8 parameter with floating ones (torch ``_flat_param.py`` "Must flatten
    tensors with uniform dtype"), and accelerate's FSDP2 path ignores uint8 ones
    (``fsdp_utils.py``)."""
    if c.rule.params:
        return (
            "bf16",
            "peft's FSDP / ZeRO-3 QLoRA recipes set bnb_4bit_quant_storage=bfloat16 so "
            "the 4-bit data shards like any parameter",
            "peft-qlora-sharded",
        )
    return "uint8", "bitsandbytes' default bnb_4bit_quant_storage (torch.uint8)", "bnb-params4bit"


DROPOUT_FAMILIES = frozenset({"gpt2"})
"""Families whose reference configs train with hidden / attention dropout 0.1."""


def _dropout(c: Context) -> Choice:
    """Megatron-LM ``megatron/training/arguments.py``: ``--hidden-dropout`` and
    ``--attention-dropout`` default to 0.1 (its GPT model applies them whatever the
    architecture); HF configs carry the family's own (GPT-2 0.1, Llama 0)."""
    if c.stack == "megatron_core":
        return 0.1, "--hidden-dropout and --attention-dropout default to 0.1", "megatron-dropout"
    if c.plan.model.architecture.family in DROPOUT_FAMILIES:
        return 0.1, "the family's reference config trains with dropout 0.1", "hf-transformers-llama"
    return 0.0, "the family's reference config trains without dropout", "hf-transformers-llama"


def _nccl(c: Context) -> Choice:
    band = nccl_band(c.plan.hardware.accelerator)
    return {"low": band.low, "high": band.high}, band.why, band.source


def _cublas(c: Context) -> Choice:
    band = workspace_band(c.plan.runtime.framework_version, c.plan.hardware.accelerator)
    return {"low": band.low, "high": band.high}, band.why, "cublas-workspace"


def _overlap_comm(c: Context) -> Choice:
    stage3 = c.rule.zero_stage == 3 and c.rule.family == "deepspeed"
    return stage3, "overlap_comm defaults to True for stage 3 only", "deepspeed-zero-config"


def _expandable(c: Context) -> Choice:
    if c.stack == "torchtitan":
        return (
            True,
            "run_train.sh exports PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True",
            "stack-torchtitan",
        )
    return False, "PyTorch's default (expandable_segments off)", "cuda-caching-allocator"


Rule = tuple[str, Any, Callable[[Context], Choice]]
"""(field path, the value that means "the stack's", the rule giving the stack's value)."""

RULES: tuple[Rule, ...] = (
    ("method.precision.policy", "auto", _policy),
    ("method.precision.grad_dtype", "auto", _grad_dtype),
    ("method.optimizer.implementation", "auto", _implementation),
    ("method.recompute.policy", "auto", _recompute),
    ("host.model_init", "auto", _model_init),
    ("runtime.activation_profile", "auto", _profile),
    ("runtime.loss_impl", "auto", _loss_impl),
    ("runtime.zero_grad", "auto", _zero_grad),
    ("runtime.qkv_fusion", "auto", lambda c: qkv_fusion(c.stack, c.kind, c.plan.runtime)),
    ("runtime.rope_cache", "auto", lambda c: rope_cache(c.stack, c.plan.runtime)),
    ("parallelism.tp_style", "auto", _tp_style),
    ("model.architecture.moe.expert_storage", "auto", _expert_storage),
    ("method.qlora.quant_storage", "auto", _quant_storage),
    ("method.dropout", None, _dropout),
    ("runtime.nccl_bytes_per_communicator", None, _nccl),
    ("runtime.cublas_workspace_bytes", None, _cublas),
    ("parallelism.knobs.ds_overlap_comm", None, _overlap_comm),
    ("runtime.expandable_segments", None, _expandable),
)
"""Every field a stack decides. A field is resolved only while it holds its ``auto``
value, so what the user set always wins; one under a section the plan does not have (the
experts' storage of a dense model) is not resolved."""

STACK_FIELDS: frozenset[str] = frozenset(path for path, _, _ in RULES)

SHOWN_ONLY_IF: dict[str, Callable[[Context], bool]] = {
    "runtime.qkv_fusion": lambda c: c.stack == "torchtitan",
    "runtime.rope_cache": lambda c: c.stack == "torchtitan",
    "method.qlora.quant_storage": lambda c: c.kind == "qlora",
    "method.dropout": lambda c: c.stack == "megatron_core" or c.rule.family == "megatron",
}
"""Fields resolved in every plan (the ledger must never read ``auto``) but counted among
the stack's derived inputs only where they apply (QLoRA's storage under a QLoRA plan,
the dropout Megatron's model applies, torchtitan's own model code: its fused wqkv and
its RoPE caches)."""
