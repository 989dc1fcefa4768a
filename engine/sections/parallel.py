"""The Parallelism section: the TP × PP × CP × DP grid, expert parallelism folded over it,
and the sharding strategy."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator, model_validator

from engine.errors import require
from engine.legality import pipeline_layout, rules
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
    fsdp1_sync_module_states: bool | None = Field(
        default=None,
        description="FSDP1 sync_module_states: each unit's states broadcast from rank 0 in "
        "250 MiB buckets at wrap time (their blocks stay cached); None = not stated, "
        "both ends of the reserve band (torch's default False; accelerate's plugin and "
        "fsdp_qlora's default low_memory set True).",
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
        (``torch/distributed/fsdp/_fully_shard/_fsdp_init.py``
        ``_get_post_forward_mesh_info``, torch 2.5+) refuses one below 1 and turns 1
        into False (keep the whole unsharded unit), so 1 is stored as False. Storing it
        as the int would also make the section equal to (and hash like) True, since
        ``True == 1`` in Python: two different plans would share every cache entry."""
        if isinstance(value, bool):
            return value
        if not 1 <= value <= 1_000_000:
            raise ValueError("as a number it is the group size to reshard to: 1 to 1,000,000")
        return False if value == 1 else value


class ParallelismSection(Section):
    """How ranks are arranged, as Megatron-Core arranges them: world = TP × PP × CP × DP.

    The expert layers of a mixture-of-experts model reuse the same ranks ("MoE parallel
    folding", ``megatron/core/parallel_state.py`` ``initialize_model_parallel``): within a
    pipeline stage the TP × CP × DP ranks are regrouped as expert TP × EP × expert DP, so
    EP × expert TP must divide TP × CP × DP and expert DP = TP × CP × DP ÷ (EP × expert TP).
    EP therefore never adds ranks; DP counts the model replicas that draw micro-batches.
    """

    tp: int = Field(default=1, ge=1, le=1024, description="Tensor-parallel size (ranks).")
    pp: int = Field(default=1, ge=1, le=1024, description="Pipeline-parallel stages (ranks).")
    virtual_stages: int = Field(
        default=1, ge=1, le=128, description="Interleaved virtual stages per rank v (count)."
    )
    cp: int = Field(default=1, ge=1, le=1024, description="Context-parallel size (ranks).")
    ep: int = Field(
        default=1,
        ge=1,
        le=4096,
        description="Expert-parallel size (ranks), folded over TP × CP × DP: adds no ranks.",
    )
    cp_comm: Literal["auto", "p2p", "all_gather"] = Field(
        default="auto",
        description="How context parallelism exchanges K/V: p2p = ring attention passing "
        "K/V chunks to the next rank (Megatron --cp-comm-type default, TransformerEngine "
        "AttnFuncWithCPAndKVP2P); all_gather = every rank gathers the whole sequence's "
        "K/V (PyTorch context_parallel's default rotate method, what torchtitan runs); "
        "auto = p2p for Megatron, all_gather otherwise.",
    )
    expert_tp: int = Field(
        default=1,
        ge=1,
        le=1024,
        description="Tensor parallelism inside each routed expert (Megatron "
        "--expert-tensor-parallel-size), folded like EP.",
    )
    dp: int = Field(
        default=8,
        ge=1,
        le=1_000_000,
        description="Data-parallel size (ranks): model replicas, each drawing its own "
        "micro-batches (EP folds into these ranks).",
    )
    sequence_parallel: bool = Field(
        default=False, description="Megatron sequence parallelism (splits norms/dropout by TP)."
    )
    tp_style: Literal["auto", "vocab_parallel", "replicated_embedding", "replicated"] = Field(
        default="auto",
        description="How TP treats the embedding and the output layer: vocab_parallel = "
        "both split by vocabulary and the logits stay split (Megatron-Core "
        "VocabParallelEmbedding and vocab-parallel cross-entropy, torchtitan loss_parallel); "
        "replicated_embedding = the embedding whole, the output layer split by vocabulary "
        "and its logits gathered to every rank (transformers' tp_plan: embed_tokens outside "
        "base_model_tp_plan, lm_head colwise_rep); replicated = both whole on every rank "
        "(DTensor parallelize_module on the decoder layers only). auto = the stack's.",
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
        default=None,
        description="Explicit decoder layers per stage; None = pp_layout or pp_split_policy.",
    )
    pp_layout: str | None = Field(
        default=None,
        max_length=10_000,
        description="A Megatron --pipeline-model-parallel-layout string, e.g. "
        '"Et*3|(tttt|)*14,ttL" (E embedding, t decoder layer, m MTP layer, L loss; pp × '
        "virtual_stages stages separated by |); None = pp_layer_split or pp_split_policy.",
    )
    pp_split_policy: Literal["auto", "even", "weighted"] = Field(
        default="auto",
        description="Layers per stage when neither pp_layer_split nor pp_layout is given: "
        "even = equal stages, any remainder to the earliest (Megatron's default split); "
        "weighted = the embedding and the output layer + loss each count as one layer, so "
        "the first and last stages hold one layer less (torchtitan's default "
        "pipeline_parallel_first/last_stage_less_layers = 1; Megatron's "
        "--account-for-embedding/loss-in-pipeline-split); auto = even when PP divides the "
        "layers, weighted otherwise.",
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
        """Ranks of the job: TP × PP × CP × DP (EP folds into them)."""
        return self.tp * self.pp * self.cp * self.dp

    @property
    def layer_split(self) -> tuple[int, ...] | None:
        """The explicit decoder layers per stage: ``pp_layer_split``, or those of
        ``pp_layout`` (its virtual stages summed per pipeline rank); None = the policy."""
        if self.pp_layer_split is not None:
            return self.pp_layer_split
        if self.pp_layout is not None:
            return pipeline_layout.stage_layers(self.pp_layout, self.pp)
        return None

    @property
    def stage_ranks(self) -> int:
        """Ranks of one pipeline stage: TP × CP × DP, regrouped for the expert layers."""
        return self.tp * self.cp * self.dp

    @property
    def expert_dp(self) -> int:
        """Expert data parallelism: the stage's ranks ÷ (EP × expert TP), at least 1
        (``legality.rules.ep_folds`` refuses a layout where the division is not exact)."""
        return max(1, self.stage_ranks // (self.ep * self.expert_tp))

    @model_validator(mode="after")
    def _consistent(self) -> ParallelismSection:
        """The rules this section can judge alone refuse a file at load time."""
        require(
            rules.split_length(self.pp_layer_split, self.pp),
            rules.split_non_negative(self.pp_layer_split),
            rules.virtual_needs_interleaving(self.virtual_stages, self.pp_schedule),
            rules.shard_group_divides_dp(self.shard_group_size, self.dp),
            rules.one_explicit_split(self.pp_layer_split, self.pp_layout),
        )
        return self
