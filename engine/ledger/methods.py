"""Training methods as branches: which tensors a rank holds, and which are trainable.

Full training trains everything; a custom subset trains chosen roles; LoRA and QLoRA
freeze the base and add adapters. Frozen tensors get no gradient or optimizer rows.
"""

from __future__ import annotations

from collections.abc import Callable

from engine.errors import PlanError
from engine.ledger.placement import LocalTensor, dense_dp_group, expert_dp_group
from engine.ledger.precision import StateFormats
from engine.ledger.sharding import shard_group_size
from engine.ledger.states import HeldTensor
from engine.plan import Plan


def _unit(t: LocalTensor) -> str:
    return f"layer.{t.tensor.layer}" if t.tensor.layer is not None else "root"


def _always(_: LocalTensor) -> bool:
    return True


def held_tensors(
    plan: Plan, placed: tuple[LocalTensor, ...], formats: StateFormats
) -> tuple[list[HeldTensor], Callable[[HeldTensor], int], str]:
    """The rank's tensors with trainability and dtype, its shard divisor and its words.

    The divisor is the size of the group that really shards each tensor: the dense
    data-parallel group (DP × CP × EP) for dense tensors, DP × CP for routed experts,
    or the hybrid shard group under HSDP.
    """
    par = plan.parallelism
    method = plan.method
    ranks_per_node = par.ranks_per_node or plan.hardware.gpus_per_node
    dense = shard_group_size(par, dense_dp_group(par), ranks_per_node)
    expert = shard_group_size(par, expert_dp_group(par), ranks_per_node)
    threshold = par.knobs.ds_param_persistence_threshold if par.strategy == "zero3" else 0

    if method.kind == "full":

        def trainable(_: LocalTensor) -> bool:
            return True
    elif method.kind == "custom":
        roles = set(method.custom.roles)
        if not roles:
            raise PlanError(
                "method.custom.roles is empty: choose the tensor roles to train "
                "(a bare trainable count cannot be placed on tensors)"
            )

        def trainable(t: LocalTensor) -> bool:  # type: ignore[misc]
            return t.tensor.role in roles
    else:
        raise NotImplementedError(f"the {method.kind} method's ledger")

    held = [
        HeldTensor(
            name=t.tensor.name,
            shape=t.shape,
            unit=_unit(t),
            trainable=trainable(t),
            param_dtype=formats.param,
            group=expert if t.expert else dense,
            persistent_full=t.tensor.numel < threshold,
        )
        for t in placed
    ]
    desc = f"{dense} (data-parallel shard group)"
    if expert != dense and any(t.expert for t in placed):
        desc = f"{dense} dense / {expert} expert (data-parallel shard groups)"
    return held, (lambda t: t.group), desc
