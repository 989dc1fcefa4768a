"""torchtitan's FSDP2 root units: the embedding its own unit, norm + lm_head another.

``torchtitan/distributed/fsdp.py`` ``apply_fsdp_to_decoder`` (0.3.0; the same split in
``parallelize_llama.apply_fsdp`` at 9dec370) wraps an untied model's ``tok_embeddings``
in its own ``fully_shard`` with the job's ``reshard_after_forward`` (True without PP),
and ``[norm, lm_head]`` in one ``fully_shard`` with ``reshard_after_forward`` only under
the ``always`` policy ("FSDP would prefetch them immediately"). So, unlike a plain
FSDP2 script whose root unit holds embedding, final norm and head from forward through
backward (:mod:`engine.ledger.peaks.gathered`):

- the head unit (final norm + lm_head) stays gathered from its forward to its own
  post-backward, which runs as soon as lm_head's input gradient exists — before the
  decoder layers' backward: live at ``forward`` and ``backward.start``;
- the embedding unit is gathered at the start of forward (freed before the loss) and
  again for its own backward, the step's last: live at ``backward.end`` only.

The head unit is also forward's last all-gather, and its output buffer is freed once
copied out, so no decoder layer's all-gather buffer waits through the loss: FSDP2's
prefetch buffer row is live only once the layers' backward runs.

A tied model groups all three in one unit not resharded after forward: the plain
root row holds. Sizes are the tensors' own (one ``fully_shard`` per group, 16-bit).

Before 0.2.0 (``runtime.torchtitan_version``; the split came with #1094, 83e6941,
2025-07-28) ``parallelize_llama.apply_fsdp`` (9dec370, e7c0cae) wrapped each block with
``reshard_after_forward = int(layer_id) < len(model.layers) - 1`` and then
``fully_shard(model, reshard_after_forward=not pp_enabled)``: embedding, final norm and
output are the root unit, resharded by its post-forward when ``model(...)`` returns —
before ``train.py`` computes the loss — and gathered again by its pre-backward hook on
the logits once their gradient exists, after the loss's backward; the root's
post-backward runs in the final callback, so the unit stays gathered through the
layers' backward (:func:`whole_root_rows`). The last block is never resharded after
forward: its unit stays gathered through the loss until its own backward makes it the
current unit.
"""

from __future__ import annotations

from collections.abc import Callable

from engine.ledger.activations.geometry import FP32, Geometry
from engine.ledger.activations.library_versions import version_tuple
from engine.ledger.groups import ranks_per_node
from engine.ledger.peaks.kept_gathered import gathered_row
from engine.ledger.placement import LocalTensor, dense_dp_group, expert_dp_group
from engine.ledger.precision import DTYPE_BYTES
from engine.ledger.row import (
    AT_LOSS,
    BACKWARD,
    FORWARD,
    FORWARD_BACKWARD,
    IN_LAYERS,
    Moment,
    Row,
)
from engine.ledger.sharding import shard_group_size
from engine.plan import Plan
from engine.stacks.families import keeps_all_gathered, rule_of
from engine.units import ceil_div, fmt_count, round_up

HEAD_ROLES = frozenset({"final_norm", "lm_head"})
"""The roles ``fully_shard([norm, lm_head])`` groups."""

HEAD_MOMENTS: frozenset[Moment] = AT_LOSS
"""Within backward: gathered until the unit's post-backward, before the layers'."""

EMBEDDING_MOMENTS: frozenset[Moment] = frozenset({"backward.end"})
"""Within backward: gathered again for the embedding's own backward, the last."""


SPLIT_UNITS_SINCE = (0, 2, 0)
"""The first torchtitan release with embedding and [norm, output] as units of their own."""


ONE_RANK_SINCE = (0, 3, 0)
"""The first torchtitan release the ledger follows that applies ``fully_shard`` at a
shard degree of 1: 0.3.0 ``models/llama3/parallelize.py`` ("Always run
apply_fsdp_to_decoder -- with shard_degree=1 it is a no-op for the all-gather but still
installs the MixedPrecisionPolicy"); 0.2.0's ``models/llama3/infra/parallelize.py``
applies FSDP only ``if parallel_dims.fsdp_enabled`` (``dp_shard > 1`` or CP)."""

WORLD_ONE_REDUCE_COPIES = 3
"""fp32 copies of a unit's gradients FSDP2's ``foreach_reduce`` holds at world size 1
(torch 2.13 ``_fully_shard/_fsdp_collectives.py``): the reduce-scatter input, a
full-size output, and ``reduce_scatter_input / gradient_divide_factor``, which
torchtitan's ``gradient_divide_factor`` 1.0 (``distributed/fsdp.py``) makes a tensor."""


def shards_one_rank(plan: Plan) -> bool:
    """Whether torchtitan's FSDP2 units are cast, gathered and reduced at a shard group
    of one as at any size (:data:`ONE_RANK_SINCE`); other stacks' DP-1 plans do not wrap."""
    return (
        plan.runtime.activation_profile == "torchtitan"
        and rule_of(plan.parallelism.strategy).family == "fsdp2"
        and version_tuple(plan.runtime.torchtitan_version) >= ONE_RANK_SINCE
    )


def regathers_head(plan: Plan) -> bool:
    """Whether torchtitan's ``[norm, lm_head]`` unit is resharded at its post-backward
    and gathered again for ``norm``'s backward (``loss_modes.titan_regather_at``): an
    untied model under FSDP, eager or chunked loss, no CP (its head is split), from
    0.2.0 (before, the whole root regathers after the loss's backward), at DP 1 only
    where torchtitan shards one rank (:func:`shards_one_rank`)."""
    par, rt = plan.parallelism, plan.runtime
    return (
        rt.activation_profile == "torchtitan"
        and not plan.model.architecture.tied_embeddings
        and version_tuple(rt.torchtitan_version) >= SPLIT_UNITS_SINCE
        and rule_of(par.strategy).fsdp
        and par.cp == 1
        and rt.loss_impl in ("eager", "chunked")
        and (par.dp > 1 or shards_one_rank(plan))
    )


def no_backward_prefetch(plan: Plan) -> bool:
    """Whether the plan's decoder backward runs without FSDP2 prefetch (``titan_prefetch``):
    torchtitan's chunked loss under FSDP2 whose layer units are resharded after forward
    and gathered at all (a shard group above one, or torchtitan sharding one rank)."""
    par, rt = plan.parallelism, plan.runtime
    return (
        rt.activation_profile == "torchtitan"
        and rt.loss_impl == "chunked"
        and rule_of(par.strategy).family == "fsdp2"
        and not keeps_all_gathered(par)
        and (shard_groups(plan)[0] > 1 or shards_one_rank(plan))
    )


def shard_groups(plan: Plan) -> tuple[int, int]:
    """(the dense tensors' shard group, the routed experts')."""
    par, rpn = plan.parallelism, ranks_per_node(plan)
    return (
        shard_group_size(par, dense_dp_group(par), rpn),
        shard_group_size(par, expert_dp_group(par), rpn),
    )


def head_regather_terms(plan: Plan, g: Geometry) -> tuple[int, int, int]:
    """(the head unit's 16-bit gathered bytes, its fp32 scatter input under the eager
    loss, the eager loss's ``backward.start`` tensors) on one rank at micro-batch ``g``.
    Under TP lm_head is ``ColwiseParallel`` (``parallelize.py`` ``apply_non_moe_tp``):
    the unit holds this rank's ⌈V ÷ TP⌉ rows and the whole norm; the loss's tensors are
    T × the logits' vocabulary (``Geometry.logits_vocab``) fp32, the kept log-probs and
    ATen's two gradients — three; under DTensor's ``loss_parallel`` (vocab-parallel
    logits, ``activations/loss.py`` ``dtensor_loss_parallel``) its backward's three
    beside the log-probs — four (``hbm.loss.saved`` + ``hbm.loss.backward_transient``)."""
    arch = plan.model.architecture
    v, h, c, gran = ceil_div(arch.vocab, g.tp), arch.hidden, g.compute_bytes, g.granularity
    eager = plan.runtime.loss_impl == "eager"
    unit = round_up(v * h * c, gran) + round_up(h * c, gran)
    one = round_up((v * h + h) * FP32, gran) if eager else 0
    held = 4 if g.tp > 1 and not g.gathered_logits else 3
    loss = held * round_up(g.tokens * g.logits_vocab * FP32, gran) if eager else 0
    return unit, one, loss


def _titan_resharding(plan: Plan) -> bool:
    return (
        plan.runtime.activation_profile == "torchtitan"
        and plan.parallelism.knobs.fsdp_reshard_after_forward is not False
    )


def splits_root(plan: Plan) -> bool:
    """Whether torchtitan's code shards embedding and head as separate units."""
    return (
        _titan_resharding(plan)
        and not plan.model.architecture.tied_embeddings
        and version_tuple(plan.runtime.torchtitan_version) >= SPLIT_UNITS_SINCE
    )


def whole_root(plan: Plan) -> bool:
    """Whether torchtitan's code (before 0.2.0) reshards the whole-model root unit after
    forward and keeps the last block gathered (module docstring)."""
    return _titan_resharding(plan) and (
        version_tuple(plan.runtime.torchtitan_version) < SPLIT_UNITS_SINCE
    )


_ROOT_WHY = "fully_shard(model): resharded after forward, gathered again after the loss's backward"
_LAST_WHY = "reshard_after_forward=False for the last block: gathered until its backward"


def whole_root_rows(plan: Plan, root_b: int, n_root: int, unit: int) -> list[Row]:
    """Before 0.2.0: the whole-model root unit (``root_b`` bytes gathered, live in
    forward and through the layers' backward, not at the loss's backward) and the last
    block's unit (``unit``, the largest layer unit), kept from forward through the loss."""
    gb = DTYPE_BYTES[plan.method.precision.compute_dtype]
    rows = [
        gathered_row(
            "hbm.gathered.root",
            "Root unit unsharded (embedding, final norm, output)",
            root_b,
            f"{n_root} tensors × {gb} B = {fmt_count(root_b)} B (torchtitan {_ROOT_WHY})",
            "torchtitan-fsdp-units-2024",
            FORWARD_BACKWARD,
            IN_LAYERS,
            role="root_unit",
        )
    ]
    if unit:
        rows.append(
            gathered_row(
                "hbm.gathered.last_layer_kept",
                "Last decoder block kept unsharded after forward",
                unit,
                f"one layer unit {fmt_count(unit)} B (torchtitan {_LAST_WHY})",
                "torchtitan-fsdp-units-2024",
                FORWARD_BACKWARD,
                AT_LOSS,
            )
        )
    return rows


def head_and_embedding(
    root: list[LocalTensor],
) -> tuple[list[LocalTensor], list[LocalTensor]]:
    """The root's tensors as (head unit, embedding unit)."""
    head = [t for t in root if t.tensor.role in HEAD_ROLES]
    return head, [t for t in root if t.tensor.role not in HEAD_ROLES]


_HEAD_WHY = "fully_shard([norm, lm_head]): not resharded after forward; at its post-backward"
_EMBEDDING_WHY = "fully_shard(tok_embeddings): resharded after forward, gathered for its backward"


def titan_root_rows(
    plan: Plan,
    root: list[LocalTensor],
    size: Callable[[list[LocalTensor]], int],
    shard: int,
    unit: int = 0,
) -> list[Row]:
    """The head and embedding units' gathered rows (``size``: a unit's gathered bytes,
    :func:`engine.ledger.peaks.gathered._per_tensor` at the gather dtype; ``unit``: the
    largest decoder-layer unit's), and under the chunked loss the head's scatter output
    (:func:`_scatter_output`).

    With no backward prefetch (:func:`no_backward_prefetch`) the embedding unit is
    all-gathered only after the first layer's post-backward, whose unit and own
    all-gather output (≥ 2 × ``unit``, the working-set row's pre-backward candidate)
    are freed by then: its unit and its all-gather output (2 × its bytes) count at
    ``backward.end`` only by what they add beyond those."""
    head, embedding = head_and_embedding(root)
    gb = DTYPE_BYTES[plan.method.precision.compute_dtype]
    rows = _scatter_output(plan, head, shard)
    own = no_backward_prefetch(plan)
    for ts, head_unit in ((head, True), (embedding, False)):
        n = size(ts)
        if not n:
            continue
        why = _HEAD_WHY if head_unit else _EMBEDDING_WHY
        words = f"{len(ts)} tensors × {gb} B = {fmt_count(n)} B (torchtitan {why})"
        if own and not head_unit:
            n, words = _after_first_layer(n, unit)
        rows.append(
            gathered_row(
                "hbm.gathered.root" if head_unit else "hbm.gathered.embedding",
                "Head unit unsharded (final norm, lm_head)"
                if head_unit
                else "Embedding unit unsharded (its backward)",
                n,
                words,
                "torchtitan-fsdp-units",
                FORWARD_BACKWARD if head_unit else BACKWARD,
                HEAD_MOMENTS if head_unit else EMBEDDING_MOMENTS,
                role="root_unit" if head_unit else None,
            )
        )
    return rows


def _after_first_layer(n: int, unit: int) -> tuple[int, str]:
    """The embedding unit's bytes beyond the first layer's freed unit and all-gather
    output, and why (:func:`titan_root_rows`)."""
    beyond = max(0, 2 * n - 2 * unit)
    return beyond, (
        f"torchtitan {_EMBEDDING_WHY}; chunked loss, no backward prefetch: after the first "
        f"layer's post-backward, its unit + all-gather output 2 × {fmt_count(n)} − the first "
        f"layer's unit + all-gather output 2 × {fmt_count(unit)}, at least 0 = "
        f"{fmt_count(beyond)} B"
    )


def _scatter_output(plan: Plan, head: list[LocalTensor], shard: int) -> list[Row]:
    """torchtitan's chunked loss reduce-scatters lm_head's fp32 gradient at its last
    chunk, inside forward (:mod:`~engine.ledger.activations.loss_modes`): the scatter's
    output, this rank's fp32 shard of the head unit (dim 0 padded to N chunks,
    ``FSDPParamGroup`` ``foreach_reduce``), is live next to its input until it is
    added into the sharded gradient."""
    if plan.runtime.loss_impl != "chunked":
        return []
    gran = plan.runtime.allocation_granularity_bytes
    el = sum([ceil_div(t.shape[0], shard) * (t.numel // t.shape[0]) for t in head if t.shape])
    n = round_up(el * 4, gran)
    return [
        gathered_row(
            "hbm.gathered.head_scatter_output",
            "Chunked loss: lm_head reduce-scatter output (fp32 shard)",
            n,
            f"{el:,} el. (÷ {shard} ranks, padded) × 4 B = {fmt_count(n)} B",
            "torchtitan-chunked-loss",
            FORWARD,
        )
    ]
