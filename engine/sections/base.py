"""Shared building blocks for plan sections: frozen strict models and ranges."""

from __future__ import annotations

import functools
import weakref
from collections.abc import Callable
from typing import Any, ClassVar, Final, TypeVar

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializationInfo,
    SerializerFunctionWrapHandler,
    model_serializer,
    model_validator,
)

CANONICAL_CONTEXT: Final[dict[str, Any]] = {"canonical": True}
"""Serialization context of a plan's canonical form (what its config hash is taken of).
A section may leave out, in that form only, an input added later while it holds the
value earlier plans meant (:class:`EvolvedSection`) — so adding such an input to the
schema changes the hash of no existing plan. Every other dump (files, field paths)
keeps every key."""


class Section(BaseModel):
    """Base of every plan section: immutable, and unknown fields are an error.

    Frozen so a plan can be shared between the GUI, the engine and the undo stack
    without copies; ``extra="forbid"`` so a typo in a file is reported, not ignored.
    """

    __slots__ = ("_field_hash",)
    model_config = ConfigDict(frozen=True, extra="forbid", validate_default=True)

    def model_post_init(self, context: Any, /) -> None:
        """Mark the hash slot "not hashed yet" (:data:`UNHASHED`) on a validated section:
        its first hash then reads the mark instead of raising and catching an
        ``AttributeError`` (~0.5 µs, twice per fresh estimate: the edited section's and
        the plan's). Sections built without validation (``model_copy``, ``with_fields``)
        may leave the slot empty; the hash handles both."""
        _HASH_SLOT.__set__(self, UNHASHED)

    def __hash__(self) -> int:
        """The hash of the section's fields, worked out once per object and kept in a
        slot of its own: the engine's ``functools`` caches key on plans and sections
        (hundreds of lookups per estimate), and pydantic's own hash walks every nested
        model on each. The slot is outside the fields: ``model_copy``, pickling and
        equality never see it, so a copy with a field changed hashes afresh."""
        try:
            value: int = _read_hash(self)
        except AttributeError:  # empty (the slot read: no pydantic __getattr__)
            value = UNHASHED
        if value != UNHASHED:
            return value
        value = hash((type(self), *self.__dict__.values()))
        _HASH_SLOT.__set__(self, value)
        return value

    def __eq__(self, other: object) -> bool:
        return fields_equal(self, other)


class EvolvedSection(Section):
    """A section that gained inputs after plans were saved with it.

    ``LATER_INPUTS`` maps each such input to the value every earlier plan meant; in the
    canonical form only (``CANONICAL_CONTEXT``) an input holding that value is left out,
    so those plans keep their config hash. Files and field paths keep every key. One
    serializer for every such section, on this class only, so sections without later
    inputs pay nothing on a dump."""

    LATER_INPUTS: ClassVar[dict[str, Any]] = {}

    @model_serializer(mode="wrap")
    def _canonical(
        self, handler: SerializerFunctionWrapHandler, info: SerializationInfo
    ) -> dict[str, Any]:
        data: dict[str, Any] = handler(self)
        if (info.context or {}).get("canonical"):
            for name, meant in self.LATER_INPUTS.items():
                if getattr(self, name) == meant:
                    data.pop(name, None)
            self._canonical_extra(data)
        return data

    def _canonical_extra(self, data: dict[str, Any]) -> None:
        """A section's own canonical rewriting beyond leaving keys out (none here)."""


UNHASHED: Final[int] = -1
"""A hash slot's "not hashed yet" mark: ``hash()`` never returns -1 (CPython makes a
``__hash__`` result of -1 into -2), so no worked-out hash reads as the mark."""
_HASH_SLOT: Final[Any] = Section.__dict__["_field_hash"]
"""The slot holding a section's field hash, read and set through its descriptor."""
_read_hash: Final[Any] = _HASH_SLOT.__get__
"""The slot's read, bound once: a call as fast as an attribute read when the slot is
set, and an ``AttributeError`` straight from the slot when not (an attribute read would
go on to pydantic's ``__getattr__``, several times slower)."""


def slot_hash(section: Section, compute: Callable[[], int]) -> int:
    """``section``'s hash from its hash slot, worked out by ``compute`` the first time:
    for a section whose hash is not its fields' (``ModelSection``: its hf_config is a
    dict), kept as every section's is (:meth:`Section.__hash__`)."""
    try:
        value: int = _read_hash(section)
    except AttributeError:  # empty
        value = UNHASHED
    if value != UNHASHED:
        return value
    value = compute()
    _HASH_SLOT.__set__(section, value)
    return value


def fields_equal(obj: BaseModel, other: object) -> bool:
    """``obj == other`` for a frozen model without private or extra attributes: the
    same object, or the same type with equal fields — what pydantic's ``__eq__``
    decides for such models, without its generic checks. A cache lookup compares its
    key with an equal plan's (every resolved plan has new, equal sections), so an
    estimate compares sections hundreds of times."""
    if obj is other:
        return True
    if type(other) is not type(obj):
        return NotImplemented if not isinstance(other, BaseModel) else False
    return obj.__dict__ == other.__dict__


_hash_memo: dict[int, tuple[weakref.ref[BaseModel], int]] = {}


def memo_hash(obj: BaseModel) -> int:
    """``obj``'s field hash, kept while it lives, for frozen models that are not
    sections (a section keeps its own, :meth:`Section.__hash__`): keyed by ``id`` and
    checked against a weak reference, so a reused id never answers for another object.
    A frozen model's fields never change, and ``model_copy`` makes a new object with
    its own entry."""
    key = id(obj)
    got = _hash_memo.get(key)
    if got is not None and got[0]() is obj:
        return got[1]
    value = hash((type(obj), *obj.__dict__.values()))
    _hash_memo[key] = (weakref.ref(obj, functools.partial(_forget_hash, key)), value)
    return value


def _forget_hash(key: int, _dead: weakref.ref[BaseModel]) -> None:
    """Drop a dead object's entry (unless a newer object holds the id by now)."""
    got = _hash_memo.get(key)
    if got is not None and got[0]() is None:
        del _hash_memo[key]


class FractionRange(Section):
    """An uncertain fraction given as a low–high band (e.g. allocator reserve 0.10–0.36)."""

    low: float = Field(ge=0.0, le=10.0)
    high: float = Field(ge=0.0, le=10.0)

    @model_validator(mode="after")
    def _ordered(self) -> FractionRange:
        if self.low > self.high:
            raise ValueError(f"low ({self.low}) must not exceed high ({self.high})")
        return self


class ByteRange(Section):
    """An uncertain byte count given as a low–high band (e.g. CUDA context)."""

    low: int = Field(ge=0, le=10**15)
    high: int = Field(ge=0, le=10**15)

    @model_validator(mode="after")
    def _ordered(self) -> ByteRange:
        if self.low > self.high:
            raise ValueError(f"low ({self.low}) must not exceed high ({self.high})")
        return self


_S = TypeVar("_S", bound=Section)


def with_fields(node: _S, update: dict[str, Any]) -> _S:
    """``node.model_copy(update=update)`` without pydantic's generic copy, for a section
    (a plan included) with no extra fields and no private attributes: the fields
    replaced, the rest shared, the fields-set record grown by the names replaced (as
    ``model_copy`` grows it), nothing validated — for values valid by construction. The
    layout search lays a plan out hundreds of times a search (three copies each)."""
    new = node.__class__.__new__(node.__class__)
    _set_dict(new, {**node.__dict__, **update})
    _set_extra(new, None)
    _set_fields_set(new, {*node.__pydantic_fields_set__, *update})
    _set_private(new, None)
    _HASH_SLOT.__set__(new, UNHASHED)  # not hashed yet, marked as validation marks it
    return new


_set_dict: Final[Any] = BaseModel.__dict__["__dict__"].__set__
_set_extra: Final[Any] = BaseModel.__dict__["__pydantic_extra__"].__set__
_set_fields_set: Final[Any] = BaseModel.__dict__["__pydantic_fields_set__"].__set__
_set_private: Final[Any] = BaseModel.__dict__["__pydantic_private__"].__set__
"""The setters of a pydantic model's own slots (and its ``__dict__``), bound once:
:func:`with_fields` sets them in C, without ``object.__setattr__``'s look-up by name."""
