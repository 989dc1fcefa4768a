"""Persistent model states of one rank: weights, master copy, gradients, optimizer.

These live for the whole step. Each row is the rank's shard summed over its
allocations, each allocation rounded up to the allocator's granularity, because that
is what ``torch.cuda.memory_allocated`` reports (memory-model §1, measured cases).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from engine.ledger.optimizers import (
    OPTIMIZER_LABELS,
    OPTIMIZER_SOURCES,
    state_allocs,
)
from engine.ledger.precision import DTYPE_BYTES, StateFormats
from engine.ledger.row import Row
from engine.ledger.sharding import StrategyRule
from engine.sections.method import OptimizerSection
from engine.units import ceil_div, fmt_count, round_up


@dataclass(frozen=True, slots=True)
class HeldTensor:
    """A tensor as the rank holds it before data-parallel sharding."""

    name: str
    shape: tuple[int, ...]
    unit: str  # wrap unit: "layer.N" or "root"
    trainable: bool
    param_dtype: str
    group: int  # size of the data-parallel group holding replicas of it
    persistent_full: bool = False  # ZeRO-3 persistence threshold: never partitioned

    @property
    def numel(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return n


@dataclass(frozen=True, slots=True)
class Alloc:
    """One allocation of a state on the rank: its element count and its source tensor(s)."""

    shape: tuple[int, ...]
    count_full: int  # elements before sharding (for the formula)

    @property
    def numel(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return n


def shard_allocs(
    tensors: Iterable[HeldTensor],
    sharded: bool,
    rule: StrategyRule,
    divisor: Callable[[HeldTensor], int],
) -> list[Alloc]:
    """The allocations a rank makes for one state of these tensors.

    Unsharded states are one allocation per tensor. Sharded ones follow the strategy's
    chunking: FSDP2 splits dim 0 (rank 0 gets ceil(d0/N) rows), ZeRO-3 splits each
    flattened tensor, FSDP1 one flat buffer per wrap unit, ZeRO-1/2 and Megatron one
    flat buffer per replica group; every split is padded so rank 0 holds a full chunk.
    """
    items = list(tensors)
    if not sharded or rule.chunking in ("dim0", "per_tensor"):
        out = []
        for t in items:
            n = divisor(t) if sharded and not t.persistent_full else 1
            if n == 1:
                out.append(Alloc(t.shape, t.numel))
            elif rule.chunking == "dim0":
                rows = ceil_div(t.shape[0], n)
                out.append(Alloc((rows, *t.shape[1:]), t.numel))
            else:
                out.append(Alloc((ceil_div(t.numel, n),), t.numel))
        return out
    buckets: dict[tuple[str, int], int] = defaultdict(int)
    for t in items:
        key = (t.unit if rule.chunking == "per_unit" else "all", divisor(t))
        buckets[key] += t.numel
    return [Alloc((ceil_div(total, n),), total) for (_, n), total in buckets.items()]


def _bytes(allocs: list[Alloc], bpe: int, granularity: int) -> int:
    return sum(round_up(a.numel * bpe, granularity) for a in allocs)


def _formula(
    allocs: list[Alloc],
    bpe: int,
    dtype: str,
    sharded: bool,
    n_desc: str,
    granularity: int,
    total: int,
) -> str:
    full = sum(a.count_full for a in allocs)
    held = sum(a.numel for a in allocs)
    share = f" ÷ {n_desc} → {fmt_count(held)} held" if sharded else ""
    return (
        f"{fmt_count(full)} elements{share} × {bpe} B ({dtype}) in {len(allocs)} "
        f"allocation(s), each rounded up to {granularity} B = {fmt_count(total)} B"
    )


def persistent_rows(
    held: list[HeldTensor],
    formats: StateFormats,
    rule: StrategyRule,
    opt_state_fn: Callable[[tuple[int, ...]], list[tuple[str, int]]],
    optimizer_name: str,
    divisor: Callable[[HeldTensor], int],
    n_desc: str,
    granularity: int,
) -> list[Row]:
    """Weights, master, gradient and optimizer rows for the tensors one rank holds."""
    rows: list[Row] = []
    trainable = [t for t in held if t.trainable]
    g = granularity

    by_dtype: dict[str, list[HeldTensor]] = defaultdict(list)
    for t in held:
        by_dtype[t.param_dtype].append(t)
    for dtype, ts in sorted(by_dtype.items()):
        allocs = shard_allocs(ts, rule.params, rule, divisor)
        bpe = DTYPE_BYTES.get(dtype, 1)
        if dtype == "nf4":
            continue  # QLoRA base weights are counted by the method's own rows
        n = _bytes(allocs, bpe, g)
        frozen = all(not t.trainable for t in ts)
        suffix = ".frozen" if frozen and trainable else ""
        rows.append(
            Row(
                id=f"hbm.weights.{dtype}{suffix}",
                label=f"Weights ({dtype}{', frozen' if suffix else ''})",
                location="hbm",
                kind="persistent",
                group="weights",
                low=n,
                high=n,
                formula=_formula(allocs, bpe, dtype, rule.params, n_desc, g, n),
                source=rule.source,
                dtype=dtype,
            )
        )

    if not trainable:
        return rows
    if formats.master is not None:
        allocs = shard_allocs(trainable, rule.optimizer, rule, divisor)
        n = _bytes(allocs, formats.master_bytes, g)
        rows.append(
            Row(
                id="hbm.master_weights",
                label="Master weights (fp32)",
                location="hbm",
                kind="persistent",
                group="optimizer",
                low=n,
                high=n,
                formula=_formula(
                    allocs, formats.master_bytes, "fp32", rule.optimizer, n_desc, g, n
                ),
                source="mixed-precision-master",
                dtype="fp32",
            )
        )

    allocs = shard_allocs(trainable, rule.grads, rule, divisor)
    n = _bytes(allocs, formats.grad_bytes, g)
    rows.append(
        Row(
            id="hbm.grads",
            label=f"Gradients ({formats.grad})",
            location="hbm",
            kind="persistent",
            group="gradients",
            low=n,
            high=n,
            formula=_formula(allocs, formats.grad_bytes, formats.grad, rule.grads, n_desc, g, n),
            source=rule.source,
            dtype=formats.grad,
        )
    )

    allocs = shard_allocs(trainable, rule.optimizer, rule, divisor)
    per_state: dict[str, list[int]] = defaultdict(list)
    for a in allocs:
        for name, n_bytes in opt_state_fn(a.shape):
            per_state[name].append(n_bytes)
    for name, sizes in per_state.items():
        n = sum(round_up(s, g) for s in sizes)
        raw = sum(sizes)
        share = f" (shards ÷ {n_desc})" if rule.optimizer else ""
        rows.append(
            Row(
                id=f"hbm.optimizer.{name}",
                label=f"Optimizer: {OPTIMIZER_LABELS.get(name, name)}",
                location="hbm",
                kind="persistent",
                group="optimizer",
                low=n,
                high=n,
                formula=(
                    f"{len(sizes)} allocation(s) totalling {fmt_count(raw)} B{share}, "
                    f"each rounded up to {g} B = {fmt_count(n)} B"
                ),
                source=OPTIMIZER_SOURCES.get(optimizer_name, "user-input"),
            )
        )
    return rows


def optimizer_state_fn(
    optimizer: OptimizerSection, state_bytes: int
) -> Callable[[tuple[int, ...]], list[tuple[str, int]]]:
    """Bind an optimizer's settings to a shape → [(state, bytes)] function."""

    def fn(shape: tuple[int, ...]) -> list[tuple[str, int]]:
        return [(a.name, a.n_bytes) for a in state_allocs(optimizer, shape, state_bytes)]

    return fn
