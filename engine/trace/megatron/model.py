"""Megatron-Core's GPTModel, DDP and optimizer for a plan, built as Megatron builds them.

``parallel_state.initialize_model_parallel`` (TP from the plan, no gloo groups:
``patches.py``), a ``TransformerConfig`` from the plan's architecture (Llama-shaped:
RMSNorm, SwiGLU, RoPE, no linear biases; bf16 parameters; no dropout — a dropout mask
is not what the ledger's ``megatron`` profile counts), the ``local`` layer spec
(``models/gpt/gpt_layer_specs.py`` ``get_gpt_layer_local_spec``) with SDPA in its
core-attention slot (``attention.py``) — built with bf16 as the default dtype, which is
what Megatron-LM's ``training.py`` ``get_model`` gets from ``Float16Module``
(``module.bfloat16()``: every parameter bf16, the local spec's torch RMSNorm weights
included; ``_apply`` cannot swap fake parameters, so the cast is made at construction)
— then ``DistributedDataParallel`` (fp32 main
grads: ``grad_reduce_in_fp32``; the distributed optimizer's layout when the plan's
strategy is ``megatron_distopt``) and ``get_megatron_optimizer`` (Adam with decoupled
weight decay, bf16, fp32 main parameters). Everything is built inside the trace's fake
mode, so no real byte is allocated; ``perform_initialization=False`` skips the
data-dependent initialisers (values never change allocations).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as functional

from engine.plan import Plan
from engine.trace.megatron.attention import SdpaCoreAttention
from engine.trace.megatron.patches import fused_adamw

LEARNING_RATE = 1e-4
"""Any value allocates the same."""


@dataclass
class MegatronModel:
    """What the runner drives: the DDP-wrapped model, Megatron's optimizer, the torch
    optimizer inside it and the buffers the tracker must be told about."""

    ddp: Any
    optimizer: Any
    inner: Any
    grad_buffers: list[Any]
    main_params: list[Any]


def _config(plan: Plan) -> Any:
    from megatron.core.transformer.transformer_config import TransformerConfig

    arch, par = plan.model.architecture, plan.parallelism
    head_dim = arch.head_dim or arch.hidden // arch.heads
    return TransformerConfig(
        num_layers=arch.layers,
        hidden_size=arch.hidden,
        num_attention_heads=arch.heads,
        num_query_groups=arch.kv_heads,
        kv_channels=head_dim,
        ffn_hidden_size=arch.intermediate,
        normalization="RMSNorm",
        gated_linear_unit=True,
        activation_func=functional.silu,
        add_bias_linear=False,
        bf16=True,
        params_dtype=torch.bfloat16,
        pipeline_dtype=torch.bfloat16,
        tensor_model_parallel_size=par.tp,
        sequence_parallel=par.tp > 1 and par.sequence_parallel,
        use_cpu_initialization=True,
        perform_initialization=False,
        hidden_dropout=0.0,
        attention_dropout=0.0,
        bias_dropout_fusion=False,
        bias_activation_fusion=True,
        apply_rope_fusion=False,
        masked_softmax_fusion=False,
        gradient_accumulation_fusion=False,
        **_recompute(plan),
    )


def _recompute(plan: Plan) -> dict[str, Any]:
    """The plan's recompute as Megatron-LM's arguments set it: ``full`` is
    ``--recompute-granularity full --recompute-method uniform --recompute-num-layers 1``
    (every layer's input kept, the layer recomputed in backward)."""
    if plan.method.recompute.policy == "full":
        return {
            "recompute_granularity": "full",
            "recompute_method": "uniform",
            "recompute_num_layers": 1,
        }
    return {}


def _spec() -> Any:
    from megatron.core.models.gpt.gpt_layer_specs import get_gpt_layer_local_spec

    spec = get_gpt_layer_local_spec(normalization="RMSNorm")
    spec.submodules.self_attention.submodules.core_attention = SdpaCoreAttention
    return spec


def init_parallel(plan: Plan) -> None:
    """Megatron's process groups over the (already initialised) fake world."""
    from megatron.core import parallel_state

    parallel_state.destroy_model_parallel()
    parallel_state.initialize_model_parallel(
        tensor_model_parallel_size=plan.parallelism.tp, create_gloo_process_groups=False
    )


def build_megatron(plan: Plan) -> MegatronModel:
    """GPTModel → DDP → optimizer, inside the caller's fake mode."""
    from megatron.core.distributed import DistributedDataParallel, DistributedDataParallelConfig
    from megatron.core.models.gpt import GPTModel
    from megatron.core.optimizer import OptimizerConfig, get_megatron_optimizer

    arch = plan.model.architecture
    distopt = plan.parallelism.strategy == "megatron_distopt"
    config = _config(plan)
    default = torch.get_default_dtype()
    torch.set_default_dtype(torch.bfloat16)
    try:
        model = GPTModel(
            config,
            _spec(),
            vocab_size=arch.vocab,
            max_sequence_length=plan.batch.seq_len,
            position_embedding_type="rope",
            share_embeddings_and_output_weights=arch.tied_embeddings,
        )
    finally:
        torch.set_default_dtype(default)
    ddp_config = DistributedDataParallelConfig(
        grad_reduce_in_fp32=True, overlap_grad_reduce=False, use_distributed_optimizer=distopt
    )
    ddp = DistributedDataParallel(config, ddp_config, model)
    opt_config = OptimizerConfig(
        optimizer="adam",
        lr=LEARNING_RATE,
        bf16=True,
        params_dtype=torch.bfloat16,
        use_distributed_optimizer=distopt,
    )
    with fused_adamw():
        optimizer = get_megatron_optimizer(opt_config, [ddp], use_gloo_process_groups=False)
    chained = getattr(optimizer, "chained_optimizers", [optimizer])
    inner = [c.optimizer for c in chained]
    mains = [
        p
        for c in chained
        for groups in (
            getattr(c, "shard_fp32_from_float16_groups", None)
            or getattr(c, "fp32_from_float16_groups", [])
        )
        for p in groups
    ]
    grads = [b.grad_data for b in ddp.buffers + ddp.expert_parallel_buffers]
    if len(inner) != 1:
        raise RuntimeError(f"expected one torch optimizer inside Megatron's, got {len(inner)}")
    return MegatronModel(ddp, optimizer, inner[0], grads, mains)
