"""The training stack's defaults: every ``auto`` field resolved in one place.

A field left at ``auto`` (``None`` for a byte range) means "what the stack's code does":
:func:`resolve_stack_defaults` replaces each with the stack's value, and records where it
came from, so the engine computes with concrete values and the window can badge each
one "from stack X". Changing the stack re-derives every field still at ``auto``; a value
the user set is never touched. Every consumer of a plan's numbers — ``estimate()``,
exports, applicability, what-if — asks this function, so none of them can disagree.
The rules themselves are in :mod:`engine.stacks.stack_rules`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from operator import attrgetter, itemgetter
from types import MappingProxyType
from typing import Any, Final

from engine.plan import (
    SECTION_ORDER,
    Plan,
    SectionsKey,
    shared_section,
    with_fields,
    with_shared_sections,
)
from engine.sections.base import ByteRange, Section
from engine.sections.method import BatchSection
from engine.sections.parallel import ParallelismSection, StrategyKnobs
from engine.sections.stack import ConcreteStack
from engine.stacks.catalog import concrete_stack, stack_info
from engine.stacks.families import rule_of
from engine.stacks.stack_rules import RULES, SHOWN_ONLY_IF, Context


@dataclass(frozen=True, slots=True)
class Derived:
    """A value a field took from the stack: the value, and why (words and source key)."""

    value: Any
    stack: ConcreteStack
    why: str
    source: str

    @property
    def badge(self) -> str:
        """What the window shows beside the field."""
        return f"from stack {self.stack}: {self.why}"


@dataclass(frozen=True, slots=True)
class ResolvedPlan:
    """A plan with every stack-decided field concrete, and where each value came from."""

    plan: Plan
    stack: ConcreteStack
    derived: Mapping[str, Derived]


def _replace(node: Section, updates: dict[str, Any]) -> Section:
    """``node`` with the fields at these dotted paths replaced, each node on the way
    copied once, without re-validation: the values the rules give are valid by
    construction (a test validates every combination)."""
    here: dict[str, Any] = {}
    below: dict[str, dict[str, Any]] = {}
    for path, value in updates.items():
        head, _, rest = path.partition(".")
        if rest:
            below.setdefault(head, {})[rest] = value
        else:
            here[head] = ByteRange(**value) if isinstance(value, dict) else value
    for head, sub in below.items():
        here[head] = _replace(getattr(node, head), sub)
    return node.model_copy(update=here)


@lru_cache(maxsize=1024)
def resolve_stack_defaults(plan: Plan) -> ResolvedPlan:
    """The plan with every ``auto`` field replaced by its stack's default (cached: views
    and the layout search resolve the same plans again and again).

    No rule reads the batch, nor any field of the parallelism section but the strategy
    and the two it decides (``tp_style``, ``knobs``), so the rules run once per plan
    *without* them — on the plan with :data:`FIXED_BATCH` in its place and the
    parallelism at its defaults but for those three fields (:func:`_layout_free`),
    cached on the other sections — and the plan's own batch and layout go back in:
    plans that differ only in the batch or the layout (the window's batch edits, a fit
    search over micro-batch sizes, the layout search's thousands of layouts) resolve in
    one copy. Run on that plan, not merely keyed on it, a rule that did read the batch
    or a layout field would be wrong at once, in every golden plan, not only on a cache
    hit."""
    fields = plan.__dict__
    own: ParallelismSection = fields["parallelism"]
    free = _layout_free(own.strategy, own.tp_style, own.knobs)
    r = _batchless(SectionsKey((*_BEFORE_PARALLELISM(fields), free, *_AFTER_PARALLELISM(fields))))
    batch = shared_section(fields["batch"])
    done = r.plan.parallelism
    par: Section
    if done.tp_style != own.tp_style or (done.knobs is not own.knobs and done.knobs != own.knobs):
        par = _decided(own, done.tp_style, done.knobs)
    else:
        par = shared_section(own)
    if batch is r.plan.batch and par is done:
        return r
    out = with_fields(r.plan, {"batch": batch, "parallelism": par})
    return ResolvedPlan(out, r.stack, r.derived)


@lru_cache(maxsize=1024)
def _decided(own: ParallelismSection, tp_style: str, knobs: StrategyKnobs) -> Section:
    """``own`` with the fields the stack's rules decide (cached: every fresh plan of one
    layout whose ``tp_style`` is ``auto`` — each batch edit in the window — would
    otherwise copy and hash a new parallelism section)."""
    return shared_section(with_fields(own, {"tp_style": tp_style, "knobs": knobs}))


_FREE_PARALLELISM: Final[ParallelismSection] = ParallelismSection()
"""The layout the stack's rules see (any would do: they read only the strategy and the
fields they decide)."""


@lru_cache(maxsize=256)
def _layout_free(strategy: str, tp_style: str, knobs: StrategyKnobs) -> ParallelismSection:
    """:data:`_FREE_PARALLELISM` with the fields the rules read or decide."""
    free = _FREE_PARALLELISM.model_copy(
        update={"strategy": strategy, "tp_style": tp_style, "knobs": knobs}
    )
    assert isinstance(free, ParallelismSection)
    return free


FIXED_BATCH: Final[BatchSection] = BatchSection()
"""The batch the stack's rules see (any would do: they never read it)."""

_NOT_BATCH: Final[tuple[str, ...]] = tuple(n for n in SECTION_ORDER if n != "batch")
_AT: Final[int] = _NOT_BATCH.index("parallelism")
_BEFORE_PARALLELISM: Final[Callable[[dict[str, Any]], tuple[Section, ...]]] = itemgetter(
    *_NOT_BATCH[:_AT]
)
_AFTER_PARALLELISM: Final[Callable[[dict[str, Any]], tuple[Section, ...]]] = itemgetter(
    *_NOT_BATCH[_AT + 1 :]
)
"""A plan's sections before and after its parallelism, in :data:`_NOT_BATCH` order,
read in C (the key of :func:`_batchless`, built on every fresh plan's resolution)."""


@lru_cache(maxsize=1024)
def _batchless(sections: tuple[Section, ...]) -> ResolvedPlan:
    """:func:`resolve_stack_defaults` of the plan of these sections (every one but the
    batch, in :data:`_NOT_BATCH` order, the parallelism layout-free) with
    :data:`FIXED_BATCH`. Built without
    validation: the sections come from a validated plan, and only the rules read it."""
    fields: dict[str, Any] = dict(zip(_NOT_BATCH, sections, strict=True))
    plan = Plan.model_construct(**fields, batch=FIXED_BATCH)
    stack = concrete_stack(plan.stack.name, plan.parallelism.strategy, plan.method.kind)
    ctx = Context(stack, rule_of(plan.parallelism.strategy), plan)
    derived: dict[str, Derived] = {}
    values: dict[str, Any] = {}
    for (path, auto, rule), (_, _, get) in zip(RULES, _GETTERS, strict=True):
        if get(plan) != auto:
            continue
        value, why, source = rule(ctx)
        shown = SHOWN_ONLY_IF.get(path)
        if shown is None or shown(ctx):
            derived[path] = Derived(value, stack, why, source)
        values[path] = value
    out = _replace(plan, values) if values else plan
    assert isinstance(out, Plan)
    if fused_model(out) and not out.model.architecture.fused_qkv:
        # the stack's model code fuses q / k / v (torchtitan's wqkv, LitGPT's attn): the
        # model the ledger counts is that one (one tensor, one optimizer step, one SAC mm)
        out = _replace(out, {"model.architecture.fused_qkv": True})
        assert isinstance(out, Plan)
    return ResolvedPlan(with_shared_sections(out), stack, MappingProxyType(derived))


def fused_model(plan: Plan) -> bool:
    """Whether the stack's model code runs q / k / v as one projection: qkv_fusion
    fused, or LitGPT's LoRA (its CausalSelfAttention has one ``attn`` linear, litgpt/
    model.py, which LoRAQKVLinear wraps)."""
    lora = plan.method.kind in ("lora", "qlora") and plan.method.lora.implementation == "litgpt"
    return plan.runtime.qkv_fusion == "fused" or lora


def resolved(plan: Plan) -> Plan:
    """The plan as the engine computes it: every stack-decided field concrete."""
    return resolve_stack_defaults(plan).plan


def stack_label(plan: Plan) -> str:
    """The stack in prose, with peft when the method is LoRA / QLoRA."""
    r = resolve_stack_defaults(plan)
    peft = " + peft" if plan.method.kind in ("lora", "qlora") else ""
    return f"{stack_info(r.stack).label}{peft}"


_ABSENT = object()
"""What a field under an absent (None) section reads as: never its ``auto``."""


def _getter(path: str) -> Callable[[Plan], Any]:
    """Reads ``path`` of a plan, or :data:`_ABSENT` when a section on the way is None."""
    parent, leaf = attrgetter(path.rsplit(".", 1)[0]), path.rsplit(".", 1)[1]

    def get(plan: Plan) -> Any:
        node = parent(plan)
        return _ABSENT if node is None else getattr(node, leaf)

    return get


_GETTERS: tuple[tuple[str, Any, Callable[[Plan], Any]], ...] = tuple(
    (path, auto, _getter(path)) for path, auto, _ in RULES
)


def unresolved_fields(plan: Plan) -> list[str]:
    """The stack-decided fields this plan still leaves at ``auto``."""
    return [path for path, auto, get in _GETTERS if get(plan) == auto]


def require_resolved(plan: Plan) -> None:
    """Refuse a plan whose stack-decided fields were not resolved: a ledger function
    reading ``auto`` would silently compute some other stack's numbers. Cached (a
    plan's fields never change, and every estimate asks twice); a refusal raises anew."""
    left = _unresolved(plan)
    if left:
        raise ValueError(
            f"{', '.join(left)} left at auto reached the ledger: pass "
            "engine.stacks.defaults.resolved(plan)"
        )


@lru_cache(maxsize=256)
def _unresolved(plan: Plan) -> tuple[str, ...]:
    return tuple(unresolved_fields(plan))
