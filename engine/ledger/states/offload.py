"""Offload: move persistent rows from HBM to host RAM or NVMe, per rank.

Offload changes where bytes live, never how fast a step runs. Each moved row keeps its
per-rank bytes (converted where the host copy has another dtype) and says whether it is
pinned, because pinned (page-locked) memory cannot be swapped and is limited by
``ulimit -l``. A moved row keeps its state and gets the id
``{location}.offload.{the HBM id without "hbm."}``. DeepSpeed's ZeRO-Offload and
ZeRO-Infinity move states and add buffers of their own
(:mod:`engine.ledger.states.offload_deepspeed`).

FSDP (torch 2.13): CPU offload keeps the sharded parameters pinned (FSDP1
``_flat_param.py``: ``_local_shard.pin_memory()``; FSDP2 ``CPUOffloadPolicy(pin_memory=
True)``) and copies each gradient shard into pinned memory (FSDP1 pre-allocates
``_cpu_grad ... .pin_memory()``; FSDP2 ``_fsdp_collectives.py foreach_reduce``:
``.to("cpu", non_blocking=True)`` into pinned memory when pin_memory); the optimizer
creates its state with ``zeros_like`` — pageable.
"""

from __future__ import annotations

from engine.ledger.held import HeldTensor
from engine.ledger.row import Row
from engine.ledger.states.moved import OFFLOAD_CLASS, move
from engine.ledger.states.offload_deepspeed import deepspeed_offload
from engine.plan import Plan
from engine.stacks.families import StrategyRule, rule_of


def offloads_nothing(plan: Plan) -> bool:
    """Neither optimizer state nor parameters are offloaded: every state stays in HBM
    (the common case, which callers answer without looking at any stage)."""
    off = plan.offload
    return off.optimizer == "none" and off.params == "none"


STAYS_ON_DEVICE = frozenset({"hbm.weights.nf4_constants"})
"""Weight rows FSDP's CPU offload leaves in HBM: bitsandbytes keeps a 4-bit weight's
absmax constants in its ``QuantState``, an attribute and no parameter. FSDP1 moves the
module to the device first (``_init_utils._move_module_to_device``: ``param.to(device)``,
which ``Params4bit.to`` extends to its ``quant_state``), then sends only the flat
parameter to the CPU (``_init_param_handle_from_params``: ``flat_param_to(cpu)`` under
``CPUOffload(offload_params=True)``); FSDP2 offloads the registered parameters alone."""


def _fsdp(rows: list[Row], plan: Plan, rule: StrategyRule) -> tuple[list[Row], list[Row]]:
    """CPUOffload / CPUOffloadPolicy: every state on the CPU; parameters and gradients
    pinned (always under FSDP1, with ``pin_memory`` under FSDP2), optimizer state not."""
    pin = plan.offload.pin_memory or rule.family == "fsdp1"
    stay: list[Row] = []
    moved: list[Row] = []
    for r in rows:
        cls = OFFLOAD_CLASS.get(r.state)
        if cls is None or r.id in STAYS_ON_DEVICE:
            stay.append(r)
        elif cls == "params":
            why = " (sharded parameters)"
            moved.append(move(r, "host", pin, why=why, source="fsdp-cpu-offload"))
        elif cls == "grads":
            why = " (gradient shards copied into pinned memory)" if pin else ""
            moved.append(move(r, "host", pin, why=why, source="fsdp-cpu-offload"))
        else:
            moved.append(move(r, "host", False, source="fsdp-cpu-offload"))
    return stay, moved


def _optimizer_only(rows: list[Row], plan: Plan) -> tuple[list[Row], list[Row]]:
    """Megatron's CPU optimizer offload: master and optimizer state on the host."""
    stay: list[Row] = []
    moved: list[Row] = []
    for r in rows:
        if OFFLOAD_CLASS.get(r.state) == "optimizer" and plan.offload.optimizer != "none":
            moved.append(move(r, "host", False, source="deepspeed-offload"))
        else:
            stay.append(r)
    return stay, moved


def split_offload(
    rows: list[Row], plan: Plan, held: list[HeldTensor]
) -> tuple[list[Row], list[Row]]:
    """(rows that stay in HBM, per-rank rows moved to or added on host / NVMe)."""
    rule = rule_of(plan.parallelism.strategy)
    if offloads_nothing(plan):
        return rows, []
    if rule.fsdp:
        return _fsdp(rows, plan, rule)
    if rule.family == "deepspeed":
        return deepspeed_offload(rows, plan, held, rule)
    return _optimizer_only(rows, plan)
