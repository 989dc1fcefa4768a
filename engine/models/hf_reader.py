"""Typed, defaulted access to one Hugging Face ``config.json`` dict.

A key that is absent takes the default transformers' configuration class gives it for
that ``model_type`` (the dataclass field of ``configuration_<family>.py``, transformers
5.24), because that is what ``from_pretrained`` builds; the family modules pass those
defaults in. A key set to ``null`` where transformers needs a number, a value of the
wrong type, or a value the inventory cannot represent raises :class:`ConfigImportError`
with one sentence naming the key.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from engine.errors import quote
from engine.models.spec import StoredDtype


class ConfigImportError(ValueError):
    """A config.json that cannot become an architecture spec; the message names the key."""


_DTYPES: dict[str, StoredDtype] = {
    "float32": "fp32",
    "bfloat16": "bf16",
    "float16": "fp16",
}

_ABSENT = object()


class Reader:
    """One config dict, its ``model_type`` and the family's transformers defaults."""

    def __init__(
        self, cfg: Mapping[str, Any], model_type: str, defaults: Mapping[str, Any]
    ) -> None:
        self.cfg = cfg
        self.model_type = model_type
        self.defaults = defaults

    def raw(self, key: str) -> Any:
        """The value as transformers would hold it: the file's, else the family default."""
        value = self.cfg.get(key, _ABSENT)
        if value is _ABSENT:
            value = self.defaults.get(key)
        return value

    def get_int(self, key: str) -> int:
        """An integer the inventory needs; absent → the family default."""
        value = self.raw(key)
        if value is None:
            if key in self.cfg:
                raise ConfigImportError(
                    f"config.json key '{key}' is null, but model_type '{self.model_type}' "
                    "needs an integer there"
                )
            raise ConfigImportError(
                f"config.json is missing the key '{key}', which model_type "
                f"'{self.model_type}' needs (transformers' default leaves it unset)"
            )
        return self.check_int(key, value)

    def opt_int(self, key: str) -> int | None:
        """An integer where ``null`` (or absent with a null default) has a meaning."""
        value = self.raw(key)
        return None if value is None else self.check_int(key, value)

    def get_bool(self, key: str) -> bool:
        value = self.raw(key)
        if value is None:
            value = bool(self.defaults.get(key, False))
        if not isinstance(value, bool):
            raise ConfigImportError(
                f"config.json key '{key}' must be true or false, not {quote(value)}"
            )
        return value

    def first_int(self, *keys: str) -> int:
        """The first of several spellings of one key that the file sets (e.g. ``num_experts``
        / ``num_local_experts``, which transformers maps onto each other)."""
        for key in keys:
            if self.cfg.get(key) is not None:
                return self.get_int(key)
        return self.get_int(keys[0])

    def require(self, key: str, ok: Callable[[Any], bool], why: str) -> None:
        """Refuse a value the inventory cannot express, naming the key and the reason."""
        value = self.raw(key)
        if not ok(value):
            raise ConfigImportError(
                f"config.json key '{key}' = {quote(value)} is not supported: {why}"
            )

    @staticmethod
    def check_int(key: str, value: Any) -> int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigImportError(
                f"config.json key '{key}' must be an integer, not {quote(value)}"
            )
        return value


def stored_dtype(cfg: Mapping[str, Any]) -> StoredDtype:
    """The checkpoint's weight dtype: FP8 block quantisation, else ``torch_dtype``."""
    quant = cfg.get("quantization_config")
    if isinstance(quant, Mapping):
        if quant.get("quant_method") == "fp8" and quant.get("fmt", "e4m3") == "e4m3":
            return "fp8_e4m3"
        raise ConfigImportError(  # a GPTQ / AWQ / bnb checkpoint: packed ints, own scales
            f"config.json key 'quantization_config' makes its weights "
            f"{quote(quant.get('quant_method'))}-quantised, which MemPlan cannot express "
            "(of quantised checkpoints only FP8 e4m3 is modelled); import the unquantised model"
        )
    raw = cfg.get("torch_dtype", cfg.get("dtype"))
    if raw is None:
        return "fp32"  # transformers saves float32 unless told otherwise
    if not isinstance(raw, str) or raw not in _DTYPES:
        raise ConfigImportError(
            f"config.json key 'torch_dtype' = {quote(raw)} is not a known dtype"
        )
    return _DTYPES[raw]
