"""The Parallelism section: the TP × PP × CP × EP × DP matrix and the sharding strategy."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator, model_validator

from engine.errors import require
from engine.legality import rules
from engine.sections.base import Section

Strategy = Literal[
    "ddp",
    "zero1",
    "zero2",
    "zero3",
    "fsdp1_full_shard",
    "fsdp1_shard_grad_op",
    "fsdp1_no_shard",
    "fsdp1_hybrid_shard",
    "fsdp1_hybrid_shard_zero2",
    "fsdp2",
    "fsdp2_hsdp",
    "megatron_distopt",
]


class StrategyKnobs(Section):
    """Framework knobs that set the size of gathered units, prefetch and buckets.

    Defaults are the frameworks' code defaults (memory-model §3), not their docs.
    """

    fsdp_reshard_after_forward: bool | int = Field(
        default=True,
        description="FSDP2: True frees gathered params after forward; False keeps every unit "
        "unsharded until backward; an int keeps a 1/int shard between them.",
    )
    fsdp_prefetch_units: int = Field(
        default=1, ge=0, le=64, description="FSDP2 units prefetched ahead (count); default 1."
    )
    fsdp1_limit_all_gathers: bool = Field(
        default=True, description="FSDP1 limit_all_gathers: at most two units unsharded."
    )
    fsdp1_backward_prefetch: Literal["backward_pre", "backward_post", "none"] = Field(
        default="backward_pre"
    )
    ds_prefetch_bucket_elements: int = Field(
        default=50_000_000,
        ge=0,
        le=10**12,
        description="DeepSpeed stage3_prefetch_bucket_size (elements); code default 5e7.",
    )
    ds_max_live_parameters: int = Field(
        default=1_000_000_000,
        ge=0,
        le=10**13,
        description="DeepSpeed stage3_max_live_parameters (elements); default 1e9.",
    )
    ds_max_reuse_distance: int = Field(default=1_000_000_000, ge=0, le=10**13)
    ds_param_persistence_threshold: int = Field(
        default=100_000,
        ge=0,
        le=10**12,
        description="DeepSpeed stage3_param_persistence_threshold (elements); smaller "
        "parameters stay unpartitioned; default 1e5.",
    )
    ds_reduce_bucket_elements: int = Field(
        default=500_000_000, ge=0, le=10**12, description="DeepSpeed reduce_bucket_size."
    )
    ds_allgather_bucket_elements: int = Field(
        default=500_000_000, ge=0, le=10**12, description="DeepSpeed allgather_bucket_size."
    )
    ds_overlap_comm: bool | None = Field(
        default=None,
        description="DeepSpeed overlap_comm; None = the stage's default "
        "(True for stage 3, False otherwise).",
    )
    accumulate_without_sync: bool = Field(
        default=False,
        description="Skip gradient sync on accumulation micro-batches (DDP/FSDP no_sync, "
        "FSDP2 set_requires_gradient_sync(False)): sharded strategies then hold the "
        "stage's unsharded gradients until the last micro-batch.",
    )
    ddp_bucket_cap_mb: float = Field(
        default=25.0, ge=0.0, le=100_000.0, description="DDP bucket_cap_mb (MiB); default 25."
    )

    @field_validator("fsdp_reshard_after_forward")
    @classmethod
    def _reshard_group_size(cls, value: bool | int) -> bool | int:
        """An int is the group size to reshard to after forward; torch's fully_shard
        (``_get_post_forward_mesh_info``, torch 2.5+) refuses one below 1 (1 = keep
        the whole unsharded unit, as False does)."""
        if not isinstance(value, bool) and not 1 <= value <= 1_000_000:
            raise ValueError("as a number it is the group size to reshard to: 1 to 1,000,000")
        return value


class ParallelismSection(Section):
    """How ranks are arranged: world size = TP × PP × CP × EP × DP."""

    tp: int = Field(default=1, ge=1, le=1024, description="Tensor-parallel size (ranks).")
    pp: int = Field(default=1, ge=1, le=1024, description="Pipeline-parallel stages (ranks).")
    virtual_stages: int = Field(
        default=1, ge=1, le=128, description="Interleaved virtual stages per rank v (count)."
    )
    cp: int = Field(default=1, ge=1, le=1024, description="Context-parallel size (ranks).")
    ep: int = Field(default=1, ge=1, le=4096, description="Expert-parallel size (ranks).")
    expert_tp: int = Field(default=1, ge=1, le=1024, description="TP inside each expert.")
    dp: int = Field(default=8, ge=1, le=1_000_000, description="Data-parallel size (ranks).")
    sequence_parallel: bool = Field(
        default=False, description="Megatron sequence parallelism (splits norms/dropout by TP)."
    )
    tp_style: Literal["auto", "vocab_parallel", "replicated_embedding"] = Field(
        default="auto",
        description="How TP treats the vocabulary: vocab_parallel (Megatron-Core "
        "VocabParallelEmbedding and vocab-parallel cross-entropy, torchtitan loss_parallel) "
        "or replicated_embedding (transformers' tp_plan: lm_head colwise_rep gathers the "
        "logits, the embedding stays whole). auto = the stack's.",
    )
    strategy: Strategy = Field(default="fsdp2", description="Data-parallel sharding strategy.")
    shard_group_size: int | None = Field(
        default=None,
        ge=1,
        le=1_000_000,
        description="HSDP / hybrid shard group (ranks); None = one node's worth of DP ranks.",
    )
    pp_schedule: Literal["1f1b", "interleaved_1f1b", "gpipe"] = Field(default="1f1b")
    pp_layer_split: tuple[int, ...] | None = Field(
        default=None, description="Explicit decoder layers per stage; None = balanced."
    )
    ranks_per_node: int | None = Field(
        default=None,
        ge=1,
        le=1024,
        description="Ranks placed on each node; None = hardware.gpus_per_node.",
    )
    knobs: StrategyKnobs = Field(default_factory=StrategyKnobs)

    @property
    def world_size(self) -> int:
        return self.tp * self.pp * self.cp * self.ep * self.dp

    @model_validator(mode="after")
    def _consistent(self) -> ParallelismSection:
        """The rules this section can judge alone refuse a file at load time."""
        require(
            rules.split_length(self.pp_layer_split, self.pp),
            rules.split_non_negative(self.pp_layer_split),
            rules.virtual_needs_interleaving(self.virtual_stages, self.pp_schedule),
            rules.shard_group_divides_dp(self.shard_group_size, self.dp),
        )
        return self
