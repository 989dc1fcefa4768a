"""Peak events of the step: gathered parameter units, communication buckets, unsharded
gradients under accumulation and the optimizer step's temporaries (memory-model §1, §3).

Each is live only in some phases (and, within backward, some moments; see
:mod:`engine.ledger.phases`). Sizes come from the rank's own tensors, so they follow
TP / PP placement and the sharding strategy's chunking exactly; framework knobs whose
effect is a bound rather than a count (DeepSpeed buckets, live-parameter caps) give a
low–high range.
"""

from __future__ import annotations

from collections import defaultdict

from engine.ledger.held import HeldTensor
from engine.ledger.placement import LocalTensor
from engine.ledger.precision import DTYPE_BYTES, StateFormats
from engine.ledger.row import ALL_PHASES, Phase, Row
from engine.ledger.sharding import StrategyRule
from engine.ledger.states.rows import shard_allocs
from engine.plan import Plan
from engine.units import ceil_div, fmt_count, round_up

FWD_BWD: frozenset[Phase] = frozenset({"forward", "backward"})
BWD: frozenset[Phase] = frozenset({"backward"})
FSDP2 = frozenset({"fsdp2", "fsdp2_hsdp"})
FSDP1 = frozenset(
    {"fsdp1_full_shard", "fsdp1_shard_grad_op", "fsdp1_hybrid_shard", "fsdp1_hybrid_shard_zero2"}
)
MIB = 2**20
HF_OVERLAP_FACTOR = 4.5
"""HF's DeepSpeed guide: with overlap_comm the buckets cost ≈ 4.5 × their size."""


def _row(
    id_: str,
    label: str,
    group: str,
    low: int,
    high: int,
    formula: str,
    source: str,
    phases: frozenset[Phase],
) -> Row:
    return Row(
        id=id_,
        label=label,
        location="hbm",
        kind="peak",
        group=group,
        low=low,
        high=high,
        formula=formula,
        source=source,
        phases=phases,
    )


def gather_bytes(plan: Plan, formats: StateFormats) -> int:
    """Element size of gathered parameters: FSDP MixedPrecision / DeepSpeed cast the
    gathered copy to the compute dtype; otherwise parameters gather as stored."""
    if plan.method.precision.policy in ("autocast", "amp_master", "pure_16bit"):
        return DTYPE_BYTES[plan.method.precision.compute_dtype]
    return formats.param_bytes


def _units(
    placed: tuple[LocalTensor, ...],
) -> tuple[list[LocalTensor], dict[int, list[LocalTensor]]]:
    root: list[LocalTensor] = []
    layers: dict[int, list[LocalTensor]] = defaultdict(list)
    for t in placed:
        if t.tensor.layer is None:
            root.append(t)
        else:
            layers[t.tensor.layer].append(t)
    return root, layers


def _per_tensor(ts: list[LocalTensor], bpe: int, gran: int) -> int:
    return sum(round_up(t.numel * bpe, gran) for t in ts)


def _padded_flat(ts: list[LocalTensor], n: int, bpe: int, gran: int) -> int:
    """One all-gather output: every tensor padded to N chunks of ceil(d0/N) rows."""
    numel = 0
    for t in ts:
        rest = t.numel // t.shape[0] if t.shape and t.shape[0] else 0
        numel += ceil_div(t.shape[0], n) * n * rest if t.shape else 0
    return round_up(numel * bpe, gran)


def gathered_rows(
    plan: Plan,
    placed: tuple[LocalTensor, ...],
    formats: StateFormats,
    shard: int,
    rule: StrategyRule,
) -> list[Row]:
    """Unsharded parameter units and prefetch of ZeRO-3 / FSDP strategies."""
    par, k = plan.parallelism, plan.parallelism.knobs
    if not rule.params or shard <= 1:
        return []
    gran = plan.runtime.allocation_granularity_bytes
    gb = gather_bytes(plan, formats)
    root, layers = _units(placed)
    unit = max((_per_tensor(ts, gb, gran) for ts in layers.values()), default=0)
    n_layers = sum(ts[0].count for ts in layers.values())  # folded layers counted out
    rows: list[Row] = []
    root_b = _per_tensor(root, gb, gran)
    strategy = par.strategy
    if strategy in FSDP2 or strategy in FSDP1:
        src = "fsdp2-prefetch" if strategy in FSDP2 else "fsdp1"
        if root_b:
            rows.append(
                _row(
                    "hbm.gathered.root",
                    "Root unit unsharded (embedding, final norm, lm_head)",
                    "gathered",
                    root_b,
                    root_b,
                    f"{len(root)} tensors × {gb} B, kept from forward through backward "
                    f"(the root is not resharded after forward) = {fmt_count(root_b)} B",
                    src,
                    FWD_BWD,
                )
            )
        rs = k.fsdp_reshard_after_forward
        keep_all = (strategy in FSDP2 and rs is False) or rule.params_live_unsharded_fwd_bwd
        if strategy in FSDP2:
            buf = max((_padded_flat(ts, shard, gb, gran) for ts in layers.values()), default=0)
            nbuf = max(1, k.fsdp_prefetch_units)
            rows.append(
                _row(
                    "hbm.gathered.all_gather_buffer",
                    f"All-gather output buffer of {nbuf} unit(s) (prefetch)",
                    "gathered",
                    nbuf * buf,
                    nbuf * buf,
                    f"{nbuf} × one decoder-layer unit gathered flat, {gb} B/element = "
                    f"{fmt_count(nbuf * buf)} B (kept until the next all-gather)",
                    src,
                    FWD_BWD,
                )
            )
        if keep_all:
            n = n_layers * unit
            rows.append(
                _row(
                    "hbm.gathered.layers",
                    "All layer units unsharded between forward and backward",
                    "gathered",
                    n,
                    n,
                    f"{n_layers} units × {fmt_count(unit)} B (reshard_after_forward=False / "
                    f"SHARD_GRAD_OP) = {fmt_count(n)} B",
                    src,
                    FWD_BWD,
                )
            )
        else:
            if strategy in FSDP2:
                live, why = 1, "current unit (the prefetched one is the all-gather buffer)"
            else:
                two = k.fsdp1_limit_all_gathers or k.fsdp1_backward_prefetch == "backward_pre"
                live = 2 if two else 1
                why = "current + next (limit_all_gathers / BACKWARD_PRE)" if two else "current"
            n = live * unit
            rows.append(
                _row(
                    "hbm.gathered.layers",
                    "Layer units unsharded during backward",
                    "gathered",
                    n,
                    n,
                    f"{why}: {live} × {fmt_count(unit)} B = {fmt_count(n)} B",
                    src,
                    BWD,
                )
            )
            if strategy in FSDP2 and isinstance(rs, int) and not isinstance(rs, bool) and rs > 1:
                kept = n_layers * ceil_div(unit, rs)
                rows.append(
                    _row(
                        "hbm.gathered.resharded",
                        f"Layer units kept 1/{rs} gathered after forward",
                        "gathered",
                        kept,
                        kept,
                        f"{n_layers} × {fmt_count(unit)} B ÷ {rs} = {fmt_count(kept)} B",
                        src,
                        FWD_BWD,
                    )
                )
    elif strategy == "zero3":
        elems = [sum(t.numel for t in ts) for ts in layers.values()]
        one = max(elems, default=0)
        hi_el = min(k.ds_max_live_parameters, one + k.ds_prefetch_bucket_elements)
        hi_el = max(hi_el, one)
        low, high = round_up(one * gb, gran), round_up(hi_el * gb, gran)
        rows.append(
            _row(
                "hbm.gathered.layers",
                "ZeRO-3 gathered parameters and prefetch",
                "gathered",
                low,
                high,
                f"one layer {fmt_count(one)} el. up to min(max_live "
                f"{fmt_count(k.ds_max_live_parameters)}, "
                f"layer + prefetch bucket {fmt_count(k.ds_prefetch_bucket_elements)}) el. × {gb} B",
                "deepspeed-zero3-config",
                FWD_BWD,
            )
        )
    return rows


def bucket_rows(
    plan: Plan, held: list[HeldTensor], formats: StateFormats, rule: StrategyRule, shard: int
) -> list[Row]:
    """Gradient communication buffers: DDP buckets, ZeRO buckets, FSDP reduce-scatter."""
    par, k = plan.parallelism, plan.parallelism.knobs
    gran = plan.runtime.allocation_granularity_bytes
    trainable = [t for t in held if t.trainable]
    if not trainable:
        return []
    gbytes = formats.grad_bytes
    numel = sum(t.numel * t.count for t in trainable)
    strategy = par.strategy
    rows: list[Row] = []
    replicas = max((t.group for t in trainable), default=1)
    if strategy in ("ddp", "fsdp1_no_shard") and replicas > 1:
        total = numel * gbytes
        cap = max(1, int(k.ddp_bucket_cap_mb * MIB))
        n_buckets = ceil_div(total, cap)
        n = round_up(total, gran) + (n_buckets - 1) * gran
        rows.append(
            _row(
                "hbm.buckets.ddp",
                "DDP gradient buckets (gradient_as_bucket_view=False)",
                "buckets",
                round_up(total, gran),
                n,
                f"a flat copy of every gradient: {fmt_count(numel)} × {gbytes} B in {n_buckets} "
                f"buckets of {k.ddp_bucket_cap_mb} MiB = {fmt_count(total)} B",
                "pytorch-ddp",
                ALL_PHASES,
            )
        )
    elif strategy in ("zero1", "zero2"):
        overlap = bool(k.ds_overlap_comm)
        el = k.ds_reduce_bucket_elements + k.ds_allgather_bucket_elements
        base = round_up(min(el, 2 * numel) * gbytes, gran)
        high = int(base * HF_OVERLAP_FACTOR) if overlap else base
        rows.append(
            _row(
                "hbm.buckets.zero",
                "ZeRO reduce / all-gather buckets",
                "buckets",
                base,
                high,
                f"(reduce {fmt_count(k.ds_reduce_bucket_elements)} + all-gather "
                f"{fmt_count(k.ds_allgather_bucket_elements)}) el. × {gbytes} B"
                + (f", up to {HF_OVERLAP_FACTOR}× with overlap_comm" if overlap else ""),
                "deepspeed-zero3-config",
                BWD | frozenset({"optimizer"}),
            )
        )
    elif strategy == "zero3":
        overlap = True if k.ds_overlap_comm is None else k.ds_overlap_comm
        el = min(k.ds_reduce_bucket_elements, numel)
        low = el * gbytes
        high = low * (2 if overlap else 1)
        rows.append(
            _row(
                "hbm.buckets.zero",
                "ZeRO-3 reduce bucket",
                "buckets",
                round_up(low, gran),
                round_up(high, gran),
                f"reduce bucket {fmt_count(el)} el. × {gbytes} B"
                + (" × 2 (overlap_comm double buffer)" if overlap else ""),
                "deepspeed-zero3-config",
                BWD,
            )
        )
    elif (strategy in FSDP2 or strategy in FSDP1) and shard > 1:
        units: dict[str, int] = defaultdict(int)
        tied = plan.model.architecture.tied_embeddings
        for t in trainable:
            if t.unit == "root" and not tied and t.name == "model.embed_tokens.weight":
                continue  # the embedding's grad appears only at the very end of backward
            units[t.unit] += t.numel
        layer_units = {u: n for u, n in units.items() if u != "root"}
        one = max(layer_units.values(), default=0)
        c = DTYPE_BYTES[plan.method.precision.compute_dtype]
        low = round_up(one * c, gran) + (round_up(one * gbytes, gran) if gbytes != c else 0)
        high = low + round_up(one * gbytes, gran)
        rows.append(
            _row(
                "hbm.buckets.reduce_scatter",
                "Unsharded grads of one unit and its reduce-scatter input",
                "buckets",
                low,
                high,
                f"{fmt_count(one)} el. × {c} B"
                + (f" + {gbytes} B reduce-dtype copy" if gbytes != c else "")
                + f" = {fmt_count(low)} B; up to one more reduce-scatter input in flight "
                f"(+{fmt_count(round_up(one * gbytes, gran))} B)",
                "fsdp2-prefetch",
                BWD,
            )
        )
        root = units.get("root", 0)
        if root:
            rb = round_up(root * c, gran)
            rows.append(
                _row(
                    "hbm.buckets.root_grads",
                    "Root unit's unsharded grads (reduced after backward)",
                    "buckets",
                    rb,
                    rb,
                    f"{fmt_count(root)} el. × {c} B = {fmt_count(rb)} B",
                    "fsdp2-prefetch",
                    BWD,
                )
            )
    return rows


def accumulation_rows(plan: Plan, held: list[HeldTensor], rule: StrategyRule) -> list[Row]:
    """Unsharded gradients held across micro-batches when accumulating without sync."""
    k = plan.parallelism.knobs
    if plan.batch.grad_accum <= 1 or not k.accumulate_without_sync or not rule.grads:
        return []
    gran = plan.runtime.allocation_granularity_bytes
    c = DTYPE_BYTES[plan.method.precision.compute_dtype]
    trainable = [t for t in held if t.trainable]
    n = sum(round_up(t.numel * c, gran) * t.count for t in trainable)
    return [
        _row(
            "hbm.grads_unsharded.accumulation",
            "Unsharded grads accumulated without sync",
            "gradients",
            n,
            n,
            f"{sum(t.count for t in trainable)} trainable tensors unsharded × {c} B over "
            f"{plan.batch.grad_accum} "
            f"micro-batches (no_sync / set_requires_gradient_sync(False)) = {fmt_count(n)} B",
            "fsdp2-prefetch",
            FWD_BWD,
        )
    ]


def optimizer_temp_rows(
    plan: Plan,
    held: list[HeldTensor],
    formats: StateFormats,
    rule: StrategyRule,
) -> list[Row]:
    """The optimizer step's temporaries (measured for AdamW, torch 2.13)."""
    opt = plan.method.optimizer
    if (
        plan.offload.optimizer != "none"
        or plan.offload.params != "none"
        or opt.implementation == "fused"
        or opt.name in ("adam8bit", "sgd")
    ):
        return []
    trainable = [t for t in held if t.trainable]
    if not trainable:
        return []
    gran = plan.runtime.allocation_granularity_bytes
    allocs = shard_allocs(trainable, rule.optimizer, rule, "state_dtype")
    sized = [(round_up(a.numel * DTYPE_BYTES[a.dtype], gran), a.count) for a in allocs]
    dtypes = "/".join(sorted({a.dtype for a in allocs}))
    if opt.implementation == "foreach":
        n = sum(size * count for size, count in sized)
        formula = (
            f"foreach: one {dtypes} copy of every (sharded) parameter, "
            f"{sum(c for _, c in sized)} allocations = {fmt_count(n)} B"
        )
    else:
        # Tensor order within a layer repeats across layers, so one layer's sequence (plus
        # the previous layer's last tensor before its first) gives the same maximum.
        sizes = [size for size, count in sized for _ in range(min(count, 2))]
        n = max((2 * s + (sizes[i - 1] if i else 0) for i, s in enumerate(sizes)), default=0)

        formula = f"for-loop: max over tensors of 2·size(p_i) + size(p_(i−1)) = {fmt_count(n)} B"
    low = n if opt.name == "adamw" else 0
    return [
        _row(
            "hbm.optimizer_step.temporaries",
            "Optimizer step temporaries",
            "temporaries",
            low,
            n,
            formula + ("" if opt.name == "adamw" else " (measured for AdamW only: low 0)"),
            "torch-adamw",
            frozenset({"optimizer"}),
        )
    ]
