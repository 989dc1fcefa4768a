"""torchtitan's own model and parallelisation for a plan, built on ``meta``.

The model is torchtitan 0.3.0's: its per-layer block configs
(``models/llama3/__init__.py`` ``_build_llama3_layers``, ``models/qwen3/__init__.py``
``_build_qwen3_layers``: q/k/v as the plan's ``fused_qkv`` says — every 0.3 flavor
passes ``fuse_qkv=True`` (one ``wqkv``), the Dec-2024 code had wq / wk / wv — SwiGLU
``feed_forward``, RMSNorm, RoPE, flex attention) filled with the plan's dimensions
instead of a named flavor, then built under ``torch.device("meta")`` in
``training.dtype`` as ``Trainer.__init__`` does. Its ``parallelize_llama`` /
``parallelize_qwen3`` then apply the AC policy and FSDP2 (``distributed/fsdp.py``
``apply_fsdp_to_decoder``: one unit per block, the embedding its own, norm + lm_head
together and not resharded after forward; ``MixedPrecisionPolicy(param_dtype=bf16,
reduce_dtype=fp32)``), always — with one rank it is a no-op all-gather that still casts.
With ``tp > 1`` the model's own sharding declarations (``set_llama3_sharding_config``
via ``Config.update_from_config``, as the trainer calls it) shard the blocks as DTensors
over a (dp_shard, tp) mesh, sequence parallel as the plan says, the logits
vocabulary-sharded for the loss-parallel cross-entropy.

The ``partial_dtensor`` SPMD backend is used: 0.3.0's default ``spmd_types`` hands
``fully_shard`` plain parameters that torch 2.13's FSDP2 refuses; ``partial_dtensor``
gives the same FSDP units and policy.

Layer-every-N AC was removed in 0.3; ``every_k`` rebuilds 0.2's placement
(``_apply_ac_to_transformer_block``: a counter over the blocks, full AC where
``count % k == 0``, counting from 1, so blocks k−1, 2k−1, … are wrapped).
"""

from __future__ import annotations

from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

import torch

from engine.plan import Plan

RESHARD_POLICY = {True: "default", False: "never"}
"""Plan ``fsdp_reshard_after_forward`` → torchtitan's ``fsdp_reshard_after_forward``."""


@dataclass
class TitanModel:
    """The built, parallelised model (still on meta) and what was applied."""

    model: Any
    model_name: str
    parallel_dims: Any


def _layers(plan: Plan) -> list[Any]:
    arch = plan.model.architecture
    head_dim = arch.head_dim or arch.hidden // arch.heads
    common = {
        "n_layers": arch.layers,
        "dim": arch.hidden,
        "n_heads": arch.heads,
        "n_kv_heads": arch.kv_heads,
        "hidden_dim": arch.intermediate,
        "attn_backend": "flex",
        "fuse_qkv": arch.fused_qkv,
    }
    if arch.family in ("qwen3", "qwen3_moe"):
        from torchtitan.models.common import CosSinRoPE
        from torchtitan.models.qwen3 import _build_qwen3_layers, _build_qwen3_moe_layers

        rope = CosSinRoPE.Config(dim=head_dim, max_seq_len=plan.batch.seq_len, theta=1e6)
        if arch.moe is None:
            return list(_build_qwen3_layers(head_dim=head_dim, rope=rope, **common))
        del common["hidden_dim"]
        return list(
            _build_qwen3_moe_layers(
                head_dim=head_dim,
                rope=rope,
                moe_hidden_dim=arch.moe.expert_intermediate,
                num_experts=arch.moe.num_experts,
                top_k=arch.moe.top_k,
                moe_comm_backend="standard",
                **common,
            )
        )
    from torchtitan.models.common import ComplexRoPE
    from torchtitan.models.llama3 import _build_llama3_layers

    if arch.head_dim not in (None, arch.hidden // arch.heads):
        raise ValueError("torchtitan's Llama 3 derives head_dim as dim // n_heads")
    rope = ComplexRoPE.Config(
        dim=head_dim, max_seq_len=plan.batch.seq_len, theta=500000, scaling="llama"
    )
    return list(_build_llama3_layers(rope=rope, **common))


def _config(plan: Plan) -> tuple[Any, Any]:
    from torchtitan.models.common import Embedding, Linear, RMSNorm

    arch = plan.model.architecture
    if arch.family in ("qwen3", "qwen3_moe"):
        from torchtitan.models.qwen3 import Qwen3Model, parallelize_qwen3

        model_cls, parallelize = Qwen3Model, parallelize_qwen3
    else:
        from torchtitan.models.llama3 import Llama3Model, parallelize_llama

        model_cls, parallelize = Llama3Model, parallelize_llama
    config = model_cls.Config(
        dim=arch.hidden,
        vocab_size=arch.vocab,
        enable_weight_tying=arch.tied_embeddings,
        tok_embeddings=Embedding.Config(num_embeddings=arch.vocab, embedding_dim=arch.hidden),
        norm=RMSNorm.Config(normalized_shape=arch.hidden),
        lm_head=Linear.Config(in_features=arch.hidden, out_features=arch.vocab),
        layers=_layers(plan),
    )
    return config, parallelize


def _ac_config(plan: Plan) -> Any:
    from torchtitan.distributed.activation_checkpoint import FullAC, SelectiveAC

    policy = plan.method.recompute.policy
    if policy == "full":
        return FullAC.Config()
    if policy == "selective":
        return SelectiveAC.Config()
    return None


def _every_k(model: Any, k: int) -> None:
    """0.2's layer-every-k AC: full checkpointing on blocks k−1, 2k−1, …"""
    from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import checkpoint_wrapper

    layers = model.get_submodule("layers")
    for count, (name, block) in enumerate(list(layers.named_children()), start=1):
        if count % k == 0:
            layers.register_module(name, checkpoint_wrapper(block, preserve_rng_state=True))


def build_titan_model(plan: Plan) -> TitanModel:
    """torchtitan's model for the plan, AC and FSDP2 applied, on ``meta``."""
    from torchtitan.config import CompileConfig, ParallelismConfig, TrainingConfig
    from torchtitan.distributed import ParallelDims

    par = plan.parallelism
    pure = plan.method.precision.policy == "pure_16bit"
    training = TrainingConfig(
        seq_len=plan.batch.seq_len,
        local_batch_size=plan.batch.micro_batch,
        dtype="bfloat16" if pure else "float32",
    )
    reshard = par.knobs.fsdp_reshard_after_forward
    if not isinstance(reshard, bool):
        raise ValueError("torchtitan reshards after forward always or never, not to a group")
    parallelism = ParallelismConfig(
        spmd_backend="partial_dtensor", fsdp_reshard_after_forward=RESHARD_POLICY[reshard]
    )
    parallelism.tensor_parallel_degree = par.tp
    parallelism.enable_sequence_parallel = par.sequence_parallel
    world = par.world_size
    dims = ParallelDims(
        dp_replicate=1, dp_shard=world // par.tp, cp=1, tp=par.tp, pp=1, ep=1, world_size=world,
        spmd_backend="partial_dtensor",
    )  # fmt: skip
    config, parallelize = _config(plan)
    # what Trainer.__init__ does before building: the sharding declarations (TP / SP)
    config.update_from_config(config=SimpleNamespace(parallelism=parallelism))
    with torch.device("meta"):
        previous = torch.get_default_dtype()
        torch.set_default_dtype(torch.bfloat16 if pure else torch.float32)
        try:
            model = config.build()
        finally:
            torch.set_default_dtype(previous)
    if plan.method.recompute.policy == "every_k":
        _every_k(model, plan.method.recompute.every_k)
    model = parallelize(
        model,
        parallel_dims=dims,
        training=training,
        parallelism=parallelism,
        compile_config=CompileConfig(),
        ac_config=_ac_config(plan),
        dump_folder="",
    )
    family = plan.model.architecture.family
    name = "llama3" if family == "llama" else "qwen3" + ("" if family == "qwen3" else " MoE")
    return TitanModel(model, name, dims)
