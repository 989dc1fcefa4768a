"""The bibliography behind every row's ``source`` key (``resources/sources.json``)."""

from __future__ import annotations

import json
from functools import cache
from importlib import resources
from typing import TypedDict


class Source(TypedDict):
    title: str
    url: str


@cache
def all_sources() -> dict[str, Source]:
    """Every source key with its title and URL."""
    text = resources.files("resources").joinpath("sources.json").read_text(encoding="utf-8")
    data: dict[str, Source] = json.loads(text)
    return data


def describe(key: str) -> str:
    """A human-readable citation for a source key (the key itself if unknown)."""
    src = all_sources().get(key)
    if src is None:
        return key
    return f"{src['title']} — {src['url']}" if src["url"] else src["title"]
