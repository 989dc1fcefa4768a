"""The Plan: every input of a training-memory plan, immutable and validated.

A Plan is the single source of truth that flows one way into ``estimate()``. It is
frozen so views and the undo stack can hold it safely; edits make a new Plan through
:func:`with_value`, which re-validates the whole thing so cross-field rules hold.
"""

from __future__ import annotations

import hashlib
import json
import operator
from functools import cache, lru_cache
from types import UnionType
from typing import Any, Union, get_args, get_origin

from pydantic import BaseModel, Field, ValidationError, model_validator

from engine.errors import PlanError, Problem, clip, field_path, quote, require
from engine.fileio.number_text import expected_words
from engine.legality import pipeline_layout, rules
from engine.sections.base import CANONICAL_CONTEXT, Section
from engine.sections.base import with_fields as with_fields
from engine.sections.hardware import HardwareSection
from engine.sections.method import BatchSection, MethodSection
from engine.sections.model import ModelSection
from engine.sections.offload import CheckpointSection, HostSection, OffloadSection
from engine.sections.parallel import ParallelismSection
from engine.sections.runtime import PolicySection, RuntimeSection
from engine.sections.stack import StackSection
from engine.sections.workload import AcceptanceSection, WorkloadSection

SECTION_ORDER: tuple[str, ...] = (
    "model",
    "stack",
    "method",
    "batch",
    "parallelism",
    "hardware",
    "offload",
    "host",
    "checkpoint",
    "runtime",
    "policy",
    "workload",
    "acceptance",
)


class Plan(Section):
    """A complete plan. The defaults form the built-in default plan.

    Default: Llama-3.1-8B full fine-tuning, bf16 compute with fp32 master weights
    (FSDP2 MixedPrecisionPolicy), AdamW, FSDP2 full sharding over one node of
    8 × H100 80 GB, sequence 4096, micro-batch 1.
    """

    model: ModelSection = Field(default_factory=ModelSection)
    stack: StackSection = Field(default_factory=StackSection)
    method: MethodSection = Field(default_factory=MethodSection)
    batch: BatchSection = Field(default_factory=BatchSection)
    parallelism: ParallelismSection = Field(default_factory=ParallelismSection)
    hardware: HardwareSection = Field(default_factory=HardwareSection)
    offload: OffloadSection = Field(default_factory=OffloadSection)
    host: HostSection = Field(default_factory=HostSection)
    checkpoint: CheckpointSection = Field(default_factory=CheckpointSection)
    runtime: RuntimeSection = Field(default_factory=RuntimeSection)
    policy: PolicySection = Field(default_factory=PolicySection)
    workload: WorkloadSection = Field(default_factory=WorkloadSection)
    acceptance: AcceptanceSection = Field(default_factory=AcceptanceSection)

    @model_validator(mode="after")
    def _cross_section(self) -> Plan:
        """Stage rules that need the model refuse a file at load time; the rest of
        legality (:mod:`engine.legality.checks`) refuses only ``estimate()``."""
        cross_section_rules(self)
        return self

    def to_canonical_json(self) -> str:
        """Canonical JSON of the inputs: sorted keys, no whitespace, ASCII only."""
        return canonical_json(self.canonical_tree())

    def canonical_tree(self) -> dict[str, Any]:
        """The inputs as hashed: the JSON dump in its canonical form, where an optional
        input added later may be left out at the value earlier plans meant (``EvolvedSection``)."""
        tree: dict[str, Any] = self.model_dump(mode="json", context=CANONICAL_CONTEXT)
        return tree

    @property
    def hbm_limit_bytes(self) -> int:
        """The HBM a rank may use: the capacity less the headroom policy. Every verdict
        compares against this one figure."""
        return int(self.hardware.capacity_bytes * (1 - self.policy.headroom_percent / 100))

    def config_hash(self) -> str:
        """SHA-256 of the canonical inputs: identifies a plan's content, not its metadata."""
        return _config_hash(self)


@lru_cache(maxsize=512)
def _config_hash(plan: Plan) -> str:
    """Cached: every estimate carries its plan's hash, and equal plans hash equally."""
    return canonical_hash(plan.canonical_tree())


def cross_section_rules(plan: Plan) -> None:
    """Raise :class:`PlanError` when the plan's pipeline does not fit its model (the
    plan's validator; :func:`with_values` runs it on a plan it puts together)."""
    par, arch = plan.parallelism, plan.model.architecture
    layout = pipeline_layout.layout_problems(
        par.pp_layout, par.pp, par.virtual_stages, arch.layers, arch.mtp_layers
    )
    require(
        *layout,
        rules.split_sums_to_layers(par.pp_layer_split, arch.layers),
        rules.pp_within_layers(par.pp, arch.layers),
    )


def canonical_json(tree: Any) -> str:
    """The canonical JSON of a plan tree: sorted keys, no whitespace, ASCII only."""
    return json.dumps(tree, sort_keys=True, separators=(",", ":"), ensure_ascii=True)


def canonical_hash(tree: Any) -> str:
    """SHA-256 of a plan tree's canonical JSON. A file's stored hash is this hash of the
    plan *as it was written*, which later MemPlan versions can check even after new inputs
    (with defaults) were added to the Plan."""
    return hashlib.sha256(canonical_json(tree).encode("ascii")).hexdigest()


def _free_json_paths(model: type[BaseModel], prefix: str) -> list[str]:
    out = []
    for name, info in model.model_fields.items():
        path = f"{prefix}{name}"
        ann = info.annotation
        arms = get_args(ann) if get_origin(ann) in (Union, UnionType) else (ann,)
        if any(get_origin(a) is dict for a in arms):
            out.append(path)
        for arm in arms:
            if isinstance(arm, type) and issubclass(arm, BaseModel):
                out += _free_json_paths(arm, f"{path}.")
    return out


@cache
def free_json_paths() -> frozenset[str]:
    """Dotted paths of the inputs that hold any JSON object (``model.hf_config``, an
    imported config.json): each is one input, so views that list inputs leaf by leaf
    stop there instead of listing the object's keys as inputs."""
    return frozenset(_free_json_paths(Plan, ""))


def default_plan() -> Plan:
    """The built-in default plan (see :class:`Plan`)."""
    return Plan()


def _set_in(tree: dict[str, Any], path: list[str], value: Any, full: str) -> None:
    node: Any = tree
    for i, key in enumerate(path[:-1]):
        if not isinstance(node, dict) or key not in node:
            raise KeyError(f"unknown field {'.'.join(path[: i + 1])!r} in {full!r}")
        node = node[key]
    if not isinstance(node, dict) or path[-1] not in node:
        raise KeyError(f"unknown field {full!r}")
    node[path[-1]] = value


def get_value(plan: Plan, path: str) -> Any:
    """The JSON value at a dotted field path, e.g. ``batch.seq_len``."""
    node: Any = plan.model_dump(mode="json")
    for key in path.split("."):
        if not isinstance(node, dict) or key not in node:
            raise KeyError(f"unknown field {path!r}")
        node = node[key]
    return node


def with_values(plan: Plan, changes: dict[str, Any]) -> Plan:
    """A new Plan with the given dotted-path fields replaced, validated.

    The sections a change touches are validated afresh from their values and the plan's
    cross-section rules run on the whole; every other section is ``plan``'s own object
    (frozen, validated when it was built — pydantic takes a model instance as it is). An
    edit so validates only what it changes, and the engine's caches, which key on
    sections, find the untouched ones already hashed and compare them by identity. A
    touched section is validated by its own class and the plan put together without
    validation (:func:`with_fields`; the sweeps, sensitivities and lever searches derive
    plans this way by the hundred); a refusal goes through the whole plan's validation,
    so its error names the field by its path in the plan, as it always has.
    Raises ``KeyError`` for an unknown path and ``pydantic.ValidationError`` for a bad
    value, so callers can name the field in their message.
    """
    touched = {path.split(".", 1)[0] for path in changes}
    tree: dict[str, Any] = {
        name: getattr(plan, name).model_dump(mode="json")
        if name in touched
        else getattr(plan, name)
        for name in SECTION_ORDER
    }
    for path, value in changes.items():
        _set_in(tree, path.split("."), value, path)
    try:  # the touched sections validated alone, the cross-section rules run on the whole
        new = with_fields(
            plan, {name: _SECTION_TYPES[name].model_validate(tree[name]) for name in touched}
        )
        cross_section_rules(new)
    except ValueError:  # pydantic's ValidationError or a rule's PlanError: refused as ever
        return Plan.model_validate(tree)  # (raises, naming the field path from the plan)
    return new


def _section_types() -> dict[str, type[Section]]:
    out: dict[str, type[Section]] = {}
    for name, info in Plan.model_fields.items():
        cls = info.annotation
        assert isinstance(cls, type) and issubclass(cls, Section), name
        out[name] = cls
    return out


_SECTION_TYPES: dict[str, type[Section]] = _section_types()
"""Each plan section's class: :func:`with_values` validates a touched section by its own
class — what validating the whole plan does to it — without pydantic's pass over the
plan's twelve other (instance, kept as they are) fields."""


def with_value(plan: Plan, path: str, value: Any) -> Plan:
    """A new Plan with one field replaced (see :func:`with_values`)."""
    return with_values(plan, {path: value})


def validation_problems(err: ValidationError, prefix: str = "") -> list[Problem]:
    """One :class:`Problem` per pydantic error, each naming the field path a user can
    act on: a legality rule's own fields and wording, else the error's location."""
    problems = []
    for item in err.errors():
        parts = [p for p in item["loc"] if not _union_tag(p)]
        loc = ".".join(str(p) for p in parts)  # the field to mark, as the plan spells it
        cause = item.get("ctx", {}).get("error")
        if isinstance(cause, PlanError):
            lead = f"{prefix}: " if prefix else ""
            problems += [Problem(p.fields, f"{lead}{p.message}") for p in cause.problems]
            continue
        where = ".".join(p for p in (prefix, field_path(parts)) if p)  # short, escaped
        msg = clip(_plain(item).removeprefix("Value error, "), 200)
        if item["type"] == "extra_forbidden":
            msg = "unknown field"
        elif item["type"] == "missing":
            msg = "required field is missing"
        got = item.get("input")
        shown = (
            ""
            if item["type"] in ("missing", "extra_forbidden") or isinstance(got, dict)
            else f" (got {quote(got)})"
        )
        problems.append(
            Problem((loc,) if loc else (), f"{where or prefix or 'plan'}: {msg}{shown}")
        )
    return problems


_UNION_TAGS = frozenset({"bool", "int", "float", "str", "none"})
_TAG_PREFIXES = ("function-", "literal[", "lax-or-strict[", "json-or-python[", "constrained-")


def _union_tag(part: object) -> bool:
    """Whether a pydantic location part names a validator or a union member (``bool`` of
    ``bool | int``) rather than a field: no plan field is spelled so, and a user acts on
    the field."""
    text = str(part)
    return text in _UNION_TAGS or text.startswith(_TAG_PREFIXES)


_WHOLE = {"int_parsing", "int_type", "int_from_float"}
_NUMBER = {"float_parsing", "float_type"}
_BOUNDS = {
    "less_than_equal": ("le", "at most"),
    "less_than": ("lt", "below"),
    "greater_than_equal": ("ge", "at least"),
    "greater_than": ("gt", "above"),
}


def _plain(item: Any) -> str:
    """Pydantic's wording of the common number errors in the sentence every path uses
    (``engine.fileio.number_text``): "expected a whole number", "must be at most 1,048,576"."""
    kind = item["type"]
    if kind in _WHOLE or kind in _NUMBER:
        return expected_words(kind in _WHOLE)
    if kind in _BOUNDS:
        key, words = _BOUNDS[kind]
        bound = item.get("ctx", {}).get(key)
        if isinstance(bound, int | float):
            return f"must be {words} {bound:,}"
    return str(item["msg"])


def describe_validation_error(err: ValidationError, prefix: str = "") -> list[str]:
    """One sentence per problem, each naming the field path a user can act on."""
    return [p.message for p in validation_problems(err, prefix)]


class SectionsKey(tuple[Section, ...]):
    """Plan sections as a cache key compared by identity: resolved plans share their
    section objects (:func:`with_shared_sections`) and an edit keeps every untouched
    section's object (:func:`with_values`), so equal keys are almost always the same
    objects, and hashing by identity spares a call of each section's ``__hash__``.
    Sections equal but not the same objects only miss the cache (what it holds is
    recomputed, equal). A cache holding the key holds its sections, so no other
    object can take one of their identities while the entry lives."""

    __slots__ = ()

    def __hash__(self) -> int:
        return hash(tuple(map(id, self)))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, SectionsKey) and all(map(operator.is_, self, other))

    def __ne__(self, other: object) -> bool:
        return not self == other


def with_section(plan: Plan, name: str, section: Section) -> Plan:
    """``plan.model_copy(update={name: section})`` without pydantic's generic copy (a
    Plan has no extra fields and no private attributes): the same fields, the same
    fields-set record, no validation — for a section valid by construction (the stack's
    resolution puts the plan's own batch back into every estimate's plan)."""
    return with_fields(plan, {name: section})


@lru_cache(maxsize=1024)
def shared_section(section: Section) -> Section:
    """The first section seen equal to ``section`` (while it stays in this cache)."""
    return section


def with_shared_sections(plan: Plan) -> Plan:
    """``plan`` with every section replaced by the first equal one seen: equal plans
    then hold the very same section objects. The engine's caches key on plans and
    sections, and every edit or layout makes new, equal sections (a validated copy, a
    resolved default); with them shared, a cache lookup's comparison is an identity
    check instead of a walk over every field. Numbers cannot change: the sections are
    equal."""
    update: dict[str, Section] = {}
    for name in SECTION_ORDER:
        section = getattr(plan, name)
        first = shared_section(section)
        if first is not section:
            update[name] = first
    return plan.model_copy(update=update) if update else plan
