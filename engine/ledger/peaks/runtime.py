"""Device memory outside PyTorch's tensors (memory-model §5), and the cuBLAS workspaces.

CUDA context and NCCL buffers per communicator are not in
``torch.cuda.memory_allocated``; the caching allocator's reserve is the gap between
reserved and allocated. These rows carry group ``runtime`` / ``allocator`` so totals can
be reported both as allocated (tensors only) and as reserved / device; their states
(``runtime``, ``allocator``) keep them out of the allocated timeline. The cuBLAS
workspaces are made here too, but PyTorch allocates them through its caching allocator
(:mod:`engine.ledger.peaks.blas_workspace`): allocated bytes.
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import partial

from engine.allocator.fsdp2_pools import (
    NO_POOLS,
    Fsdp2Pools,
    fsdp2_formula,
    reduce_scatter_inputs,
)
from engine.allocator.reserve import (
    ReserveModel,
    SideBytes,
    before_rs_ends,
    loss_floor,
    reserved_extra,
    stuck_extra,
    with_forward,
    with_fsdp2,
    with_logits,
)
from engine.ledger.activations.geometry import geometry
from engine.ledger.activations.loss import dtensor_loss_parallel
from engine.ledger.groups import stage_groups
from engine.ledger.peaks import titan_head_gather
from engine.ledger.peaks.blas_workspace import workspace_row
from engine.ledger.peaks.fsdp1_grad_pool import pool_words
from engine.ledger.peaks.fsdp1_side import fsdp1_side
from engine.ledger.peaks.fsdp1_wrap import forward_cache
from engine.ledger.precision import DTYPE_BYTES, resolve_formats
from engine.ledger.row import Row, make_row
from engine.plan import Plan
from engine.sections.runtime import RuntimeSection
from engine.stacks.accelerators import nccl_band
from engine.stacks.blas_workspace import torch_build
from engine.stacks.families import family_of
from engine.units import fmt_count

RUNTIME_GROUP = "runtime"
ALLOCATOR_GROUP = "allocator"


def communicators(plan: Plan, stage: int) -> list[str]:
    """The NCCL communicators one rank of ``stage`` joins, from its parallel groups
    (:func:`engine.ledger.groups.stage_groups`). DeepSpeed keeps one more: its data-parallel
    group is a clone of the world group (``deepspeed/utils/groups.py``
    ``_get_data_parallel_group`` → ``_clone_world_group``: ``dist.new_group`` over every
    rank, because ``dist.get_global_rank`` does not work on ``dist.group.WORLD``), while
    the launcher's barriers (accelerate ``wait_for_everyone``, HF Trainer's
    ``main_process_first``) run on the default group — two NCCL communicators where the
    groups list one (source-review R10)."""
    labels = [g.label for g in stage_groups(plan, stage)]
    if labels and family_of(plan.parallelism.strategy) == "deepspeed":
        labels.append("world (default group; DeepSpeed's DP group is its clone)")
    return labels


def runtime_rows(plan: Plan, stage: int) -> list[Row]:
    rt = plan.runtime
    rows = list(_context_rows(rt, plan.hardware.accelerator))
    comms = communicators(plan, stage)
    if comms:
        n = len(comms)
        per = rt.nccl_bytes_per_communicator
        if per is None:  # left to the accelerator generation: resolve the plan first
            raise ValueError("runtime.nccl_bytes_per_communicator left at auto: resolve the plan")
        band = nccl_band(plan.hardware.accelerator)
        why = (
            band.why
            if (per.low, per.high) == (band.low, band.high)
            else "runtime.nccl_bytes_per_communicator as set"
        )
        source = band.source if why == band.why else "nccl-buffers"
        rows.append(
            make_row(
                id="hbm.runtime.nccl",
                label=f"NCCL buffers, {n} communicator(s)",
                state="runtime",
                role="nccl_buffers",
                location="hbm",
                kind="persistent",
                group=RUNTIME_GROUP,
                low=n * per.low,
                high=n * per.high,
                formula=partial(_nccl_formula, n, per.low, per.high, why, tuple(comms)),
                source=source,
            )
        )
    return rows


def _nccl_formula(n: int, low: int, high: int, why: str, comms: tuple[str, ...]) -> str:
    return (
        f"{n} × {fmt_count(low)}–{fmt_count(high)} B ({why}; "
        "multi-node and all-to-all communicators can need more, NVIDIA/nccl #986): "
        + ", ".join(comms)
    )


_CONTEXT: dict[tuple[int, str], tuple[RuntimeSection, tuple[Row, Row]]] = {}
""":func:`_context_rows` by the runtime section's identity and the card (a layout
search's plans share one; the entry holds it, so its id is not reused)."""


def _context_rows(rt: RuntimeSection, accelerator: str) -> tuple[Row, Row]:
    """The CUDA context's and cuBLAS workspaces' rows, which read only the runtime
    section and the card: made once per pair (rows are immutable, so stages share them)."""
    key = (id(rt), accelerator)
    got = _CONTEXT.get(key)
    if got is not None and got[0] is rt:
        return got[1]
    rows = (
        make_row(
            id="hbm.runtime.cuda_context",
            label="CUDA context",
            state="runtime",
            role="cuda_context",
            location="hbm",
            kind="persistent",
            group=RUNTIME_GROUP,
            low=rt.cuda_context_bytes.low,
            high=rt.cuda_context_bytes.high,
            formula="per process, lazy vs eager module loading (runtime.cuda_context_bytes)",
            source="cuda-context",
        ),
        workspace_row(rt, accelerator, RUNTIME_GROUP),
    )
    if len(_CONTEXT) >= 1024:
        _CONTEXT.clear()
    _CONTEXT[key] = (rt, rows)
    return rows


def reserve_factors(plan: Plan) -> ReserveModel:
    """The plan's :class:`~engine.allocator.reserve.ReserveModel`, read once per plan:
    estimate() applies it to every stage's peak (:func:`reserve_bytes`)."""
    rt = plan.runtime
    if rt.reserve_model == "fraction":
        band = rt.allocator_reserve
        return ReserveModel(True, (band.low, band.high), (0.0, 0.0), bool(rt.expandable_segments))
    frag, side = rt.fragmentation, rt.side_stream_cache
    return ReserveModel(
        False,
        (frag.low, frag.high),
        (side.low, side.high),
        bool(rt.expandable_segments),
        plan.hardware.capacity_bytes,
        family_of(plan.parallelism.strategy) == "fsdp1",
    )


def reserve_bytes(
    model: ReserveModel,
    peak_low: int,
    peak_high: int,
    steady: tuple[int, int] | None = None,
    side: int = 0,
    at_loss: tuple[int, int] | None = None,
    moment: str | None = None,
) -> tuple[int, int]:
    """(low, high) of reserved − allocated (:func:`~engine.allocator.reserve.reserved_extra`)
    over this allocated range, whose persistent part is ``steady`` (None: no transient
    bytes known, so only the ``fraction`` model adds any); ``at_loss`` the allocated
    range at the loss's backward when the range is the backward phase's; ``moment`` the
    moment the range peaks at (FSDP1's freed gradients: None, not counted)."""
    return reserved_extra(model, peak_low, peak_high, steady, side, at_loss, moment)


def loss_side(side: int, plan: Plan, last: bool) -> int:
    """``side`` with the eager loss's fp32 requests (:func:`~engine.allocator.reserve.
    with_logits`) when the stage computes Hugging Face's causal-LM loss: the smallest is
    the shifted log-probs, ``b·(s − 1)·V·4`` (transformers <= 4.44 ``shift_logits =
    logits[..., :-1, :].contiguous()``; later versions pad the labels, so ``b·s·V·4``),
    and the block the upcast frees is the 16-bit logits, ``b·s·V·c``."""
    rt = plan.runtime
    if last and isinstance(side, SideBytes) and side.fsdp2.ag:
        return _titan_loss(side, plan)
    if not last or rt.loss_impl != "eager" or rt.activation_profile != "hf-transformers":
        return side
    if not isinstance(side, SideBytes) or side.init == (0, 0):
        return side
    g = geometry(plan)
    b, s, v, c = plan.batch.micro_batch, plan.batch.seq_len, g.logits_vocab, g.compute_bytes
    if not rt.logits_fp32_upcast and c != 4:
        return side
    tokens = b * (s - 1) if rt.kept_logits == "fp32" else b * s
    side = with_logits(side, b * s * v * c if c != 4 else 0, tokens * v * 4)
    wrap = getattr(side, "wrap", None)  # FSDP1's units: replay the checkpointed forward
    return with_forward(side, forward_cache(plan, wrap)) if wrap else side


def _titan_loss(side: SideBytes, plan: Plan) -> SideBytes:
    """FSDP2 ``side`` with torchtitan's plain loss at the loss's backward
    (:mod:`~engine.allocator.fsdp2_pools`): the 16-bit logits block freed before backward
    (``train.py``: ``loss_fn`` upcasts ``pred.flatten(0, 1).float()``, then ``del pred``)
    and the loss's T × V blocks live then — the fp32 log-probs it saved and the
    gradients its backward makes (as :mod:`~engine.ledger.activations.loss` counts them:
    two, three under DTensor's loss_parallel). Unchanged for another profile or loss, and
    under pipeline parallelism, whose schedule computes the loss and keeps the stage's
    output for its backward (no ``del pred``)."""
    rt = plan.runtime
    if rt.activation_profile != "torchtitan" or rt.loss_impl not in ("eager", "vocab_parallel"):
        return side
    if plan.parallelism.pp > 1:
        return side
    g = geometry(plan)
    c = g.compute_bytes
    if c == 4 or not rt.logits_fp32_upcast or rt.kept_logits != "none":
        return side
    tv = g.tokens * g.logits_vocab
    gran = g.granularity
    one = -(-tv * 4 // gran) * gran
    n = 1 + (3 if dtensor_loss_parallel(rt, g, 4) else 2)
    hole = titan_head_gather.head_gather_hole(plan, -(-tv * c // gran) * gran, one)
    pools = side.fsdp2._replace(hole=hole, loss=n * one)
    return with_fsdp2(side, pools)


def stuck_bytes(
    model: ReserveModel, peak_low: int, peak_high: int, steady: tuple[int, int] | None = None
) -> tuple[int, int]:
    """(low, high) of the reserve a free-and-retry cannot release, which the fit test
    adds (:func:`~engine.allocator.reserve.stuck_extra`); with ``steady`` None it is 0
    under the allocator model — what the layout search's floors may count."""
    return stuck_extra(model, peak_low, peak_high, steady)


def side_bytes(rows: Iterable[Row], plan: Plan | None = None) -> SideBytes:
    """The gathered units and gradient buckets among ``rows`` (the side-stream pools'
    working sets, ``runtime.side_stream_cache`` multiplies them); under an FSDP1
    ``plan`` with sharded units, with the cache its construction leaves on the compute
    stream (:func:`~engine.allocator.reserve.fsdp1_init_cache`), read from the root
    unit's and the layer units' gathered rows."""
    rows = tuple(rows)  # FSDP1's root prefetch: in a cached unshard block (SideBytes.ahead)
    ahead = sum(r.high for r in rows if r.role == "prefetched_unit")
    total = sum(r.high for r in rows if r.group in SIDE_GROUPS and r.location == "hbm") - ahead
    if plan is not None and family_of(plan.parallelism.strategy) == "fsdp2":
        return with_fsdp2(total, fsdp2_pools(rows, plan))
    if plan is None or family_of(plan.parallelism.strategy) != "fsdp1":
        return SideBytes(total)
    return fsdp1_side(rows, plan, total, ahead)


def fsdp2_pools(rows: tuple[Row, ...], plan: Plan) -> Fsdp2Pools:
    """FSDP2's side-stream pools from the stage's rows (:mod:`~engine.allocator.
    fsdp2_pools`): the all-gather stream's working set, the root unit's all-gather output
    beside one layer unit's (the ``root_unit`` row and the largest ``all_gather_output``
    row), and the sharded gradients the reduce-scatter stream allocated, which
    ``zero_grad(set_to_none=True)`` frees into its pool (the persistent gradient rows;
    none free when zeros are filled, gradients accumulate over micro-batches or CPU
    offload copies them out, ``foreach_reduce``'s ``new_sharded_grad.to("cpu")``)."""
    hbm = [r for r in rows if r.location == "hbm"]
    root = sum(r.high for r in hbm if r.role == "root_unit")
    ag = root + max((r.high for r in hbm if r.role == "all_gather_output"), default=0)
    freed = (
        plan.runtime.zero_grad == "set_to_none"
        and plan.batch.grad_accum == 1
        and plan.offload.params != "cpu"
    )
    rs = sum(r.high for r in hbm if r.group == "gradients" and r.kind == "persistent")
    layer, own = _rs_inputs(hbm, plan, root)
    return Fsdp2Pools(ag, rs if freed else 0, rs_layer=layer, rs_root=own)


def _rs_inputs(hbm: list[Row], plan: Plan, root: int) -> tuple[int, int]:
    """:func:`~engine.allocator.fsdp2_pools.reduce_scatter_inputs`: the layer's input row;
    the root's gathered elements in the reduce dtype where all train (full fine-tuning)."""
    prec = plan.method.precision
    own = root * resolve_formats(prec).reduce_bytes // DTYPE_BYTES[prec.compute_dtype]
    layer = max((r.high for r in hbm if r.role == "reduce_scatter_input"), default=0)
    version = torch_build(plan.runtime.framework_version).version
    return reduce_scatter_inputs(version, layer, own if plan.method.kind == "full" else 0)


SIDE_GROUPS = frozenset({"gathered", "buckets"})
"""Row groups made on a side stream (FSDP's and DeepSpeed's all-gather and reduce-scatter)."""


def reserve_row(
    plan: Plan,
    peak_low: int,
    peak_high: int,
    steady: tuple[int, int] | None = None,
    side: int = 0,
    at_loss: tuple[int, int] | None = None,
    moment: str | None = None,
) -> Row:
    """The caching allocator's reserve over the allocated peak (reserved − allocated)."""
    model = reserve_factors(plan)
    low, high = reserve_bytes(model, peak_low, peak_high, steady, side, at_loss, moment)
    stuck = stuck_bytes(model, peak_low, peak_high, steady)
    if model.fraction:
        band = plan.runtime.allocator_reserve

        def formula() -> str:
            return (
                f"allocated {fmt_count(peak_low)}–{fmt_count(peak_high)} B × "
                f"{band.low:.2f}–{band.high:.2f} (runtime.reserve_model 'fraction', "
                "pessimistic: all of it counts toward fit)"
            )

    else:
        st = steady or (peak_low, peak_high)

        def formula() -> str:
            init, unit = getattr(side, "init", (0, 0)), getattr(side, "unit", 0)
            pools = (
                f"FSDP1: the larger of it and the construction cache {fmt_count(init[0])}–"
                f"{fmt_count(init[1])} B less the compute stream's transient, + side pools "
                f"0–{fmt_count(unit)} B (one unit beyond the {fmt_count(side)} B gathered)"
                + pool_words(side, moment)
                if model.fsdp1
                else f"side-stream pools {model.side[0]:.2f}–{model.side[1]:.2f} × "
                f"{fmt_count(side)} B gathered/buckets"
            )
            floor = (
                " — or, at least, the loss's backward's allocated bytes plus the whole "
                "construction cache and the 16-bit logits' freed block, none of which "
                "its fp32 T × V requests fit (allocator.reserve.loss_floor)"
                if at_loss is not None and loss_floor(side, at_loss) is not None
                else ""
            )
            fsdp2 = getattr(side, "fsdp2", NO_POOLS)
            if fsdp2.ag and not model.fsdp1:
                loss = (
                    None if at_loss is None else (at_loss[0] >= peak_low, at_loss[1] >= peak_high)
                )
                span = (max(0, peak_low - st[0]), max(0, peak_high - st[1]))
                free = (
                    None
                    if at_loss is None or loss is None
                    else before_rs_ends(at_loss, peak_low, peak_high, loss)
                )
                pools = fsdp2_formula(model.frag, model.side, fsdp2, span, loss, free)
                return (
                    f"{pools}; of it {fmt_count(stuck[0])}–{fmt_count(stuck[1])} B cannot be "
                    "released before an OOM"
                    + (" (expandable_segments on)" if model.expandable else "")
                    + titan_head_gather.formula_note(plan, fsdp2.hole if loss and loss[1] else 0)
                )
            return (
                f"fragmentation {model.frag[0]:.2f}–{model.frag[1]:.2f} × transient "
                f"{fmt_count(max(0, peak_low - st[0]))}–{fmt_count(max(0, peak_high - st[1]))} B "
                f"+ {pools}; of it {fmt_count(stuck[0])}–"
                f"{fmt_count(stuck[1])} B cannot be released before an OOM"
                + (" (expandable_segments on)" if model.expandable else "")
                + floor
            )

    return make_row(
        id="hbm.runtime.allocator_reserve",
        label="Caching allocator reserve (reserved − allocated)",
        state="allocator",
        location="hbm",
        kind="peak",
        group=ALLOCATOR_GROUP,
        low=low,
        high=high,
        formula=formula,
        source="cuda-caching-allocator",
    )


def outside_capacity(plan: Plan, row: Row) -> bool:
    """Whether ``row`` is already outside the capacity the verdict compares with: when the
    capacity is what the framework can allocate (``framework_visible``), the CUDA context
    has been taken from it."""
    return plan.hardware.usable_policy == "framework_visible" and row.role == "cuda_context"
