"""FSDP2's padding of stacked experts: a diagnostic note, not a row.

transformers 5 and torchtitan hold a layer's routed experts as 3-D ``(E, out, in)``
parameters. FSDP2 chunks every parameter on dim 0 (``torch/distributed/fsdp/
_fully_shard/_fsdp_param.py`` ``FSDPParam._init_sharded_param``: ``torch.chunk`` into N
chunks, each rank's shard padded to chunk 0's ``ceil(d0/N)`` rows), so the experts are
split by whole experts: with N ranks > E experts every rank holds one whole expert, and
the parameters, gradients and optimizer states of the experts take ``N·ceil(E/N) / E``
times their even share. The state rows already count it (dim-0 chunking is the strategy
table's rule); this note says why the number is what it is, and what avoids it.
"""

from __future__ import annotations

from engine.ledger.shape_free import shape_free
from engine.ledger.states.persistent import stage_held, stage_placed
from engine.plan import Plan
from engine.stacks.families import rule_of
from engine.units import ceil_div


def expert_padding_note(plan: Plan) -> str | None:
    """The note for a plan whose FSDP2 shards stacked experts unevenly, else None
    (``plan`` resolved: its experts' storage concrete). It never reads the micro-batch's
    shape: worked out on the :func:`~engine.ledger.shape_free.shape_free` plan."""
    return _note(shape_free(plan))


def _note(plan: Plan) -> str | None:
    rule = rule_of(plan.parallelism.strategy)
    if rule.chunking != "dim0" or not rule.params or plan.model.architecture.moe is None:
        return None  # only routed experts are stacked
    for stage in range(plan.parallelism.pp):
        stacked = {t.tensor.name: t.shape[0] for t in stage_placed(plan, stage) if t.tensor.stacked}
        if not stacked:
            continue
        groups = {h.name: h.group for h in stage_held(plan, stage)[0] if h.name in stacked}
        experts, n = next((stacked[k], g) for k, g in groups.items())
        if n <= 1 or experts % n == 0:
            return None
        rows = ceil_div(experts, n)
        return (
            f"FSDP2 chunks each stacked experts tensor on its expert dim: {experts} experts "
            f"over {n} ranks leave {rows} whole expert(s) per rank ({n * rows} slots for "
            f"{experts}), so the experts' parameters, gradients and optimizer states take "
            f"{n * rows / experts:.2f}× their even share; expert parallelism "
            "(parallelism.ep) or fully_shard(shard_placement_fn=…) on a dim that N divides "
            "avoids the padding"
        )
    return None
