"""The checkpoint-save event on the GPU.

A sharded (distributed) checkpoint writes each rank's own shard; what it puts on the GPU
depends on who builds the shard. Under FSDP2 / DCP the state dict holds the DTensors'
local shards themselves: nothing is gathered or copied. Under FSDP1's
``SHARDED_STATE_DICT`` (torch ``_state_dict_utils._sharded_pre_state_dict_hook``) every
unit is unsharded in turn — the root unit stays unsharded until its post hook, after all
of its children — and ``_sharded_post_state_dict_hook`` replaces each parameter with a
ShardedTensor whose local shard is a clone of the rank's chunk
(``_shard_utils._create_chunk_sharded_tensor``: ``chunks[rank].clone()``), on the GPU;
only ``ShardedStateDictConfig(offload_to_cpu=True)`` moves each clone to the host as it
is made. ``checkpoint.staging gpu`` is that case (accelerate before v0.31.0 left
``state_dict_config`` None for ``SHARDED_STATE_DICT``, so torch's default
``offload_to_cpu=False`` applied; v0.31.0's ``set_state_dict_type`` sets it True). The
clones all stay alive until the state dict is written: peft's
``get_peft_model_state_dict`` (accelerate ``save_fsdp_model(adapter_only=True)``) calls
``model.state_dict()`` and only then keeps the adapters' keys.

A full state dict consolidated on rank 0 gathers the whole checkpoint on one rank — on
its GPU when staged there, otherwise one unit at a time on its way to host RAM
(memory-model §7). The host side of the same event is in the node's host ledger
(:mod:`engine.ledger.nodes.host`), and the checkpoint's size comes from
:func:`engine.ledger.nodes.checkpoint_storage.checkpoint_size`, so the three never disagree.
"""

from __future__ import annotations

from engine.ledger.nodes.checkpoint_storage import checkpoint_size
from engine.ledger.nodes.whole_model import whole_model_rows
from engine.ledger.row import CHECKPOINT, Row, make_row
from engine.plan import Plan
from engine.units import fmt_count

NOT_A_PARAMETER: frozenset[str] = frozenset({"hbm.weights.nf4_constants"})
"""Weight rows that are not FSDP1 parameters: bitsandbytes keeps the 4-bit weights'
``quant_state`` (absmax, nested absmax, code) on the Params4bit / module, outside the
flat parameter, and ``Linear4bit._save_to_state_dict`` adds it to the state dict
detached, without a copy."""


def fsdp1_shard_clone_bytes(plan: Plan, shard: int) -> int:
    """One rank's chunk of every parameter FSDP1 flattened (the model's weights and the
    adapters, in their stored dtype), i.e. what ``SHARDED_STATE_DICT`` clones on the
    GPU: ceil(whole / shard) per parameter row."""
    arch, method = plan.model.architecture, plan.method
    rows = whole_model_rows(arch, method)
    kept = (r for r in rows if r.checkpoint in ("weights", "adapters"))
    return sum(-(-r.high // shard) for r in kept if r.id not in NOT_A_PARAMETER)


def _fsdp1_sharded(plan: Plan) -> bool:
    s = plan.parallelism.strategy
    return s.startswith("fsdp1_") and s != "fsdp1_no_shard"


def _event_row(id: str, label: str, n: int, formula: str, source: str) -> Row:
    """One GPU row of the checkpoint event: ``n`` bytes live while it is written."""
    return make_row(
        id=id,
        label=label,
        state="checkpoint",
        location="hbm",
        kind="peak",
        group="checkpoint",
        low=n,
        high=n,
        formula=formula,
        source=source,
        phases=CHECKPOINT,
    )


def _fsdp1_sharded_row(plan: Plan, root_unit_bytes: int, shard: int) -> Row:
    clones = fsdp1_shard_clone_bytes(plan, shard)
    formula = (
        f"this rank's chunk of every parameter cloned on the GPU "
        f"({fmt_count(clones)} B, weights and adapters / {shard}) + the root unit "
        f"unsharded until its post hook ({fmt_count(root_unit_bytes)} B)"
    )
    label = "FSDP1 sharded state dict: every shard cloned on the GPU"
    return _event_row(
        "hbm.checkpoint.sharded_clones", label, clones + root_unit_bytes, formula, "fsdp1"
    )


def checkpoint_rows(plan: Plan, largest_unit_bytes: int, shard: int = 1) -> list[Row]:
    """GPU rows of the checkpoint phase for one rank (rank 0 when consolidating).
    ``largest_unit_bytes``: the root unit's gathered bytes; ``shard``: the dense
    parameters' shard group size."""
    ck = plan.checkpoint
    if ck.format == "sharded":
        if ck.staging == "gpu" and _fsdp1_sharded(plan):
            return [_fsdp1_sharded_row(plan, largest_unit_bytes, shard)]
        return []
    if ck.staging == "gpu":
        full = checkpoint_size(plan).total
        n, label = full, "Full state dict gathered on the GPU"
        formula = f"the whole checkpoint ({fmt_count(full)} B) assembled on rank 0's GPU"
    else:
        n, label = largest_unit_bytes, "One unit gathered on its way to host"
        formula = (
            f"largest gathered unit {fmt_count(largest_unit_bytes)} B, copied to host "
            "RAM unit by unit (offload_to_cpu)"
        )
    return [_event_row("hbm.checkpoint.gathered", label, n, formula, "torch-dcp")]
