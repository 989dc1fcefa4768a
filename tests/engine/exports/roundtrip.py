"""Shared machinery of the round-trip tests: plans to export, a base that differs in every
field the export carries, and the comparison.

The contract (issue 16): ``import(export(plan), base)`` restores every field the export
expressed, whatever ``base`` held there. The base is the plan with each expressed field
changed to another valid value (one at a time, keeping those the plan's validators
accept), so an exporter that forgets to write a field, or an importer that forgets to
read it, leaves the changed value behind and the comparison names the field.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from pydantic import ValidationError

from engine.estimate import estimate
from engine.exports.common import balanced_or, shard_group
from engine.plan import Plan, get_value, with_values
from engine.stacks.defaults import resolve_stack_defaults, resolved
from engine.stacks.families import rule_of

WORDS = [
    "fp32",
    "bf16",
    "fp16",
    "none",
    "cpu",
    "nvme",
    "amp_master",
    "autocast",
    "pure_16bit",
    "ddp",
    "zero1",
    "zero2",
    "zero3",
    "fsdp2",
    "fsdp2_hsdp",
    "fsdp1_full_shard",
    "megatron_distopt",
    "full",
    "selective",
    "every_k",
    "offload",
    "foreach",
    "fused",
    "for_loop",
    "adamw",
    "sgd",
    "lion",
    "sharded",
    "consolidated_rank0",
    "meta",
    "full_copy_per_rank",
    "zero_init",
    "pytorch",
    "hf_trainer",
    "deepspeed",
    "torchtitan",
    "megatron_core",
    "1f1b",
    "gpipe",
    "rmsnorm",
    "layernorm",
    "swiglu",
    "gelu",
    "geglu",
    "rotary",
    "learned",
]

DISPLAY_ONLY = frozenset({"model.name", "model.preset"})
"""Fields that name things and change no number."""


def _alternatives(value: Any) -> list[Any]:
    if isinstance(value, bool):
        return [not value]
    if isinstance(value, int):
        return [value * 2, value + 1, max(1, value // 2), 3]
    if isinstance(value, float):
        return [value / 2, value * 2]
    if isinstance(value, str):
        return [w for w in WORDS if w != value]
    if value is None:
        return [2, 4]
    return []


def scrambled(plan: Plan, fields: Iterable[str]) -> Plan:
    """``plan`` with each of ``fields`` moved to another value its validators accept."""
    base = resolved(plan)
    for path in sorted(fields):
        try:
            current = get_value(base, path)
        except KeyError:
            continue
        if isinstance(current, dict):
            base = scrambled(base, [f"{path}.{k}" for k in current])
            continue
        for alt in _alternatives(current):
            try:
                base = with_values(base, {path: alt})
                break
            except (ValidationError, ValueError):
                continue
    return base


def canonical(plan: Plan) -> dict[str, Any]:
    """The resolved plan as JSON with the fields that say one thing two ways made equal:
    an explicit global batch equal to micro × accumulation × replicas, and the shard
    group (meaningless outside hybrid strategies; its computed size inside them), and a
    pipeline split equal to the balanced one."""
    r = resolve_stack_defaults(plan)
    p = r.plan
    tree = p.model_dump(mode="json")
    tree["stack"]["name"] = r.stack
    b, par = p.batch, p.parallelism
    if b.global_batch == b.micro_batch * b.grad_accum * par.dp * par.ep:
        tree["batch"]["global_batch"] = None
    if par.pp_layer_split is not None:
        split = balanced_or(list(par.pp_layer_split), p.model.architecture.layers)
        tree["parallelism"]["pp_layer_split"] = None if split is None else list(split)
    hybrid = rule_of(par.strategy).hybrid
    tree["parallelism"]["shard_group_size"] = shard_group(p) if hybrid else None
    return tree


def _flat(tree: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(tree, dict):
        out: dict[str, Any] = {}
        for k, v in tree.items():
            out.update(_flat(v, f"{prefix}{k}."))
        return out
    return {prefix[:-1]: tree}


def _under(key: str, roots: Iterable[str]) -> bool:
    return any(key == r or key.startswith(r + ".") for r in roots)


def differences(
    got: Plan, want: Plan, only: Iterable[str] | None = None, skip: Iterable[str] = ()
) -> list[str]:
    """Field paths (leaves) where ``got`` differs from ``want``; ``only``: restrict to
    these paths and the leaves under them; ``skip``: leave out these and theirs."""
    a, b = _flat(canonical(got)), _flat(canonical(want))
    keys = sorted(set(a) | set(b))
    if only is not None:
        roots = tuple(only)
        keys = [k for k in keys if _under(k, roots)]
    skipped = tuple(skip)
    keys = [k for k in keys if not _under(k, skipped)]
    return [
        f"{k}: got {a.get(k)!r}, want {b.get(k)!r}"
        for k in keys
        if k not in DISPLAY_ONLY and a.get(k) != b.get(k)
    ]


def same_estimate(got: Plan, want: Plan) -> bool:
    """The two plans' estimates agree on every row and the peak, to the byte."""
    ea, eb = estimate(got), estimate(want)
    rows = [(r.id, r.low, r.high) for r in ea.rows]
    return rows == [(r.id, r.low, r.high) for r in eb.rows] and ea.peak == eb.peak
