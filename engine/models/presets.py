"""The preset catalogue: one JSON file per model in ``resources/models``.

Each file records where its architecture came from (the Hugging Face repo's
``config.json``) and the published parameter total with its source, so a test can hold
every preset to its authors' figure. Files are found through ``importlib.resources`` so
the catalogue works from an installed wheel or a desktop bundle, not only a checkout.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import Any

from pydantic import ValidationError

from engine.errors import quote
from engine.models.spec import ArchitectureSpec


class PresetError(ValueError):
    """A preset that does not exist or whose file is malformed."""


@dataclass(frozen=True, slots=True)
class PresetInfo:
    """One catalogue entry, with the totals the ``models`` listing shows."""

    name: str
    display_name: str
    family: str
    hf_repo: str
    total: int
    active_per_token: int
    embedding: int
    published_total: int
    published_exact: bool  # the exact figure is published (else derived from a rounded one)
    published_source: str


@dataclass(frozen=True, slots=True)
class _Preset:
    name: str
    display_name: str
    hf_repo: str
    published_total: int
    published_exact: bool
    published_source: str
    spec: ArchitectureSpec


def _parse(name: str, doc: Any) -> _Preset:
    try:
        source = doc["source"]
        published = doc["published_total"]
        return _Preset(
            name=str(doc["name"]),
            display_name=str(doc["display_name"]),
            hf_repo=str(source["hf_repo"]),
            published_total=int(published["params"]),
            published_exact=bool(published["exact"]),
            published_source=str(published["source"]),
            spec=ArchitectureSpec.model_validate(doc["architecture"]),
        )
    except (KeyError, TypeError) as exc:
        raise PresetError(f"preset {name!r} is missing the key {exc}") from None
    except ValidationError as exc:
        raise PresetError(f"preset {name!r} has an invalid architecture: {exc}") from None


@lru_cache(maxsize=1)
def _catalogue() -> dict[str, _Preset]:
    out: dict[str, _Preset] = {}
    folder = resources.files("resources").joinpath("models")
    for entry in sorted(folder.iterdir(), key=lambda e: e.name):
        if not entry.name.endswith(".json"):
            continue
        stem = entry.name.removesuffix(".json")
        try:
            doc = json.loads(entry.read_text(encoding="utf-8"))
        except json.JSONDecodeError as exc:
            raise PresetError(f"preset file {entry.name} is not valid JSON: {exc.msg}") from None
        preset = _parse(stem, doc)
        if preset.name != stem:
            raise PresetError(f"preset file {entry.name} names itself {preset.name!r}")
        out[preset.name] = preset
    return out


def preset_names() -> list[str]:
    """All preset names, sorted."""
    return sorted(_catalogue())


def load_preset(name: str) -> tuple[str, ArchitectureSpec]:
    """``(display name, architecture)`` of a preset; case-insensitive name."""
    presets = _catalogue()
    preset = presets.get(name) or presets.get(name.lower())
    if preset is None:
        import difflib  # only to say what a mistyped name was meant to be

        close = difflib.get_close_matches(name.lower()[:100], sorted(presets), n=3, cutoff=0.5)
        hint = f"; did you mean {', '.join(close)}?" if close else ""
        raise PresetError(f"unknown model preset {quote(name)}{hint}")
    return preset.display_name, preset.spec


def preset_titles() -> list[tuple[str, str, int]]:
    """``(name, display name, published total)`` of every preset, smallest published
    total first: what a chooser lists before the exact counts (which build each model's
    whole tensor inventory, about 10 ms a preset) are computed."""
    titles = [(p.name, p.display_name, p.published_total) for p in _catalogue().values()]
    return sorted(titles, key=lambda t: (t[2], t[0]))


def exact_total(name: str) -> int:
    """The exact parameter count of one preset (from its tensor inventory)."""
    from engine.models.summary import summarize  # the inventory walk: asked for, not on load

    _, spec = load_preset(name)
    return summarize(spec).total


def list_presets() -> list[PresetInfo]:
    """Every preset with its computed totals, smallest first."""
    from engine.models.summary import summarize

    infos: list[PresetInfo] = []
    for p in _catalogue().values():
        s = summarize(p.spec)
        infos.append(
            PresetInfo(
                name=p.name,
                display_name=p.display_name,
                family=p.spec.family,
                hf_repo=p.hf_repo,
                total=s.total,
                active_per_token=s.active_per_token,
                embedding=s.embedding,
                published_total=p.published_total,
                published_exact=p.published_exact,
                published_source=p.published_source,
            )
        )
    return sorted(infos, key=lambda i: (i.total, i.name))


def _human(n: int) -> str:
    for div, unit in ((10**12, "T"), (10**9, "B"), (10**6, "M"), (10**3, "K")):
        if n >= div:
            return f"{n / div:.2f}{unit}"
    return str(n)


def format_models_table() -> str:
    """The table ``memplan models`` prints: name, family, total, active, embedding."""
    head = ("preset", "family", "total params", "active/token", "embedding")
    rows = [head]
    for i in list_presets():
        rows.append(
            (
                i.name,
                i.family,
                f"{i.total:,} ({_human(i.total)})",
                _human(i.active_per_token),
                _human(i.embedding),
            )
        )
    widths = [max(len(r[c]) for r in rows) for c in range(len(head))]
    right = {2, 3, 4}
    lines = []
    for r in rows:
        cells = [
            r[c].rjust(widths[c]) if c in right else r[c].ljust(widths[c]) for c in range(len(head))
        ]
        lines.append("  ".join(cells).rstrip())
    return "\n".join(lines)
