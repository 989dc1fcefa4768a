"""Strategy families and the strategy table: the one place that says what each
data-parallel strategy is.

Every module that needs to know whether a strategy is DeepSpeed, FSDP1, FSDP2, DDP or
Megatron, whether it shards a state, or how it chunks, asks this table instead of
spelling a tuple of strategy names — so adding a strategy is one row here. The table is
memory-model §2 as data. Chunking decides the exact per-rank count: FSDP2 chunks each
tensor on dim 0 (rank 0 holds ceil(d0/N) rows), FSDP1 pads one flat parameter per
wrapped unit, DeepSpeed ZeRO-3 partitions each parameter (padded to ceil(numel/N)) into
flat per-group buffers, and ZeRO-1/2 and Megatron's distributed optimizer partition one
flat buffer.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from engine.sections.parallel import ParallelismSection, Strategy

Family = Literal["ddp", "deepspeed", "fsdp1", "fsdp2", "megatron"]
Chunking = Literal["dim0", "per_tensor", "per_unit", "flat"]


@dataclass(frozen=True, slots=True)
class FamilyInfo:
    """A framework family: its name in prose and the prefix its knobs share in
    ``parallelism.knobs`` (None: it has no knobs of its own)."""

    label: str
    knob_prefix: str | None


FAMILIES: dict[Family, FamilyInfo] = {
    "ddp": FamilyInfo("DDP", "ddp_"),
    "deepspeed": FamilyInfo("DeepSpeed ZeRO", "ds_"),
    "fsdp1": FamilyInfo("FSDP1", "fsdp1_"),
    "fsdp2": FamilyInfo("FSDP2", "fsdp_"),
    "megatron": FamilyInfo("Megatron", None),
}

FSDP_FAMILIES: frozenset[Family] = frozenset({"fsdp1", "fsdp2"})
"""PyTorch FSDP, either generation: they share CPU offload and mixed-precision casting."""


@dataclass(frozen=True, slots=True)
class StrategyRule:
    """What one strategy shards. ``optimizer`` covers moments and any fp32 master.

    ``knobs`` are the ``parallelism.knobs`` prefixes that change this strategy's rows
    (FSDP1 NO_SHARD reads none: it all-reduces each unit's gradient in place).
    """

    label: str
    family: Family
    params: bool
    grads: bool
    optimizer: bool
    chunking: Chunking
    source: str
    knobs: tuple[str, ...]
    hybrid: bool = False  # shards within a shard group, replicates across groups (HSDP)
    params_live_unsharded_fwd_bwd: bool = False  # SHARD_GRAD_OP-like: gathered until backward

    @property
    def fsdp(self) -> bool:
        """PyTorch FSDP (1 or 2)."""
        return self.family in FSDP_FAMILIES

    @property
    def shards_nothing(self) -> bool:
        """Every state replicated on every rank: gradients are all-reduced in DDP buckets."""
        return not (self.params or self.grads or self.optimizer)

    @property
    def zero_stage(self) -> int:
        """The ZeRO stage this strategy is equivalent to in what it shards (0: nothing,
        1: optimizer, 2: + gradients, 3: + parameters between forward and backward)."""
        if self.params and not self.params_live_unsharded_fwd_bwd:
            return 3
        return 2 if self.grads else 1 if self.optimizer else 0


_DDP = ("ddp_",)
_DS = ("ds_",)
_FSDP1 = ("fsdp1_",)
_FSDP2 = ("fsdp_",)

STRATEGIES: dict[Strategy, StrategyRule] = {
    "ddp": StrategyRule("DDP", "ddp", False, False, False, "flat", "pytorch-ddp", _DDP),
    "zero1": StrategyRule("ZeRO-1", "deepspeed", False, False, True, "flat", "zero-paper", _DS),
    "zero2": StrategyRule("ZeRO-2", "deepspeed", False, True, True, "flat", "zero-paper", _DS),
    "zero3": StrategyRule("ZeRO-3", "deepspeed", True, True, True, "per_tensor", "zero-paper", _DS),
    "fsdp1_full_shard": StrategyRule(
        "FSDP1 FULL_SHARD", "fsdp1", True, True, True, "per_unit", "fsdp1", _FSDP1
    ),
    "fsdp1_shard_grad_op": StrategyRule(
        "FSDP1 SHARD_GRAD_OP",
        "fsdp1",
        True,
        True,
        True,
        "per_unit",
        "fsdp1",
        _FSDP1,
        params_live_unsharded_fwd_bwd=True,
    ),
    # NO_SHARD all-reduces each flat_param.grad in place (no DDP reducer, no gather)
    "fsdp1_no_shard": StrategyRule(
        "FSDP1 NO_SHARD", "fsdp1", False, False, False, "per_unit", "fsdp1", ()
    ),
    "fsdp1_hybrid_shard": StrategyRule(
        "FSDP1 HYBRID_SHARD", "fsdp1", True, True, True, "per_unit", "fsdp1", _FSDP1, hybrid=True
    ),
    "fsdp1_hybrid_shard_zero2": StrategyRule(
        "FSDP1 _HYBRID_SHARD_ZERO2",
        "fsdp1",
        True,
        True,
        True,
        "per_unit",
        "fsdp1",
        _FSDP1,
        hybrid=True,
        params_live_unsharded_fwd_bwd=True,
    ),
    "fsdp2": StrategyRule("FSDP2 fully_shard", "fsdp2", True, True, True, "dim0", "fsdp2", _FSDP2),
    "fsdp2_hsdp": StrategyRule(
        "FSDP2 HSDP", "fsdp2", True, True, True, "dim0", "fsdp2", _FSDP2, hybrid=True
    ),
    "megatron_distopt": StrategyRule(
        "Megatron distributed optimizer",
        "megatron",
        False,
        False,
        True,
        "flat",
        "megatron-distopt",
        (),
    ),
}


MEGATRON_DDP = StrategyRule(
    "Megatron DDP (no distributed optimizer)",
    "megatron",
    False,
    False,
    False,
    "flat",
    "megatron-ddp",
    (),
)
"""Strategy ``ddp`` under ``stack.name`` megatron_core: Megatron-Core's own
``DistributedDataParallel``, not torch's. Megatron-Core 0.16.1
``megatron/core/distributed/param_and_grad_buffer.py``: ``_ParamAndGradBuffer.__init__``
allocates ``grad_data`` (every ``param.main_grad`` a view of it) when the model is wrapped,
and ``_ParamAndGradBucketGroup.start_grad_sync`` all-reduces each bucket's ``grad_data``
view in place (``torch.distributed.all_reduce(bucket.grad_data, ...)``): no torch
``Reducer`` buckets and no per-tensor ``.grad`` made during backward. Every state is
replicated (``shards_nothing``), but the family is Megatron's."""


def rule_of(strategy: Strategy) -> StrategyRule:
    """The table row of a strategy."""
    return STRATEGIES[strategy]


def stack_rule_of(strategy: Strategy, stack: str) -> StrategyRule:
    """:func:`rule_of` as the plan's stack runs it: ``ddp`` under Megatron-Core is
    :data:`MEGATRON_DDP` (its grad buffer, not torch DDP's reducer)."""
    if strategy == "ddp" and stack == "megatron_core":
        return MEGATRON_DDP
    return STRATEGIES[strategy]


def family_of(strategy: Strategy) -> Family:
    """The framework family a strategy belongs to."""
    return STRATEGIES[strategy].family


def keeps_all_gathered(par: ParallelismSection) -> bool:
    """Whether every parameter unit stays gathered from its forward to its backward:
    FSDP1 SHARD_GRAD_OP-like strategies always, FSDP2 with
    ``reshard_after_forward=False``. Then backward issues no all-gather."""
    rule = STRATEGIES[par.strategy]
    return rule.params_live_unsharded_fwd_bwd or (
        rule.family == "fsdp2" and par.knobs.fsdp_reshard_after_forward is False
    )
