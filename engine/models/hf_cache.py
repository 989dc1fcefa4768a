"""Find a model by its Hugging Face id in the local hub cache, without the network.

The cache is where ``huggingface_hub`` puts downloads: ``$HF_HUB_CACHE``, else
``$HF_HOME/hub``, else ``$XDG_CACHE_HOME/huggingface/hub``, else
``~/.cache/huggingface/hub`` (``huggingface_hub.constants``). A repo lives in
``models--ORG--NAME``; ``refs/<revision>`` holds the commit a branch or tag points to and
``snapshots/<commit>/`` the files (links into ``blobs/``). Only ``config.json`` and the
safetensors headers are read, never a weight.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from engine.fileio.bounded_read import FileRefused, inside, read_text
from engine.models.importer import FolderImport, import_model_folder

_COMMIT = re.compile(r"^[0-9a-f]{40}$")
_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*(/[A-Za-z0-9][A-Za-z0-9._-]*)?$")


class ModelNotCachedError(LookupError):
    """The model (or revision) is not in any local cache; the message names the paths."""


@dataclass(frozen=True, slots=True)
class CachedModel:
    """A model found in the cache: where, at which commit, and what it yielded."""

    model_id: str
    snapshot: Path
    commit: str
    imported: FolderImport


def hub_cache_dir(env: Mapping[str, str] | None = None) -> Path:
    """The hub cache folder ``huggingface_hub`` uses under these environment variables."""
    e = os.environ if env is None else env
    if e.get("HF_HUB_CACHE"):
        return Path(e["HF_HUB_CACHE"]).expanduser()
    if e.get("HF_HOME"):
        return Path(e["HF_HOME"]).expanduser() / "hub"
    if e.get("XDG_CACHE_HOME"):
        return Path(e["XDG_CACHE_HOME"]).expanduser() / "huggingface" / "hub"
    return Path.home() / ".cache" / "huggingface" / "hub"


def repo_folder(model_id: str, cache: Path) -> Path:
    """``models--ORG--NAME`` inside ``cache``."""
    return cache / ("models--" + model_id.replace("/", "--"))


def _snapshot(repo: Path, revision: str) -> tuple[Path, str]:
    """The snapshot folder and commit of ``revision`` (a branch, tag or commit)."""
    if _COMMIT.match(revision):
        return repo / "snapshots" / revision, revision
    ref = repo / "refs" / revision
    if not _ID.match(revision) or not inside(ref, repo / "refs"):
        raise ModelNotCachedError(f"{revision!r} is not a revision name (a branch, tag or commit)")
    if not ref.exists():
        raise ModelNotCachedError(
            f"{repo.name} has no ref {revision!r} ({ref} is missing); pass a commit or "
            "another revision"
        )
    try:  # a ref is one commit hash: a FIFO, a device or a huge file is refused unread
        commit = read_text(ref, limit=4096).strip()
    except FileRefused as exc:
        raise ModelNotCachedError(f"{repo.name}'s refs/{revision}: {exc}") from None
    if not _COMMIT.match(commit):
        raise ModelNotCachedError(
            f"{repo.name}'s refs/{revision} does not hold a commit hash (40 hex digits); "
            "the cache is damaged or was edited"
        )
    return repo / "snapshots" / commit, commit


def find_cached_model(
    model_id: str, revision: str = "main", env: Mapping[str, str] | None = None
) -> tuple[Path, str]:
    """(snapshot folder holding config.json, commit) of ``model_id`` at ``revision``."""
    if not _ID.match(model_id):
        raise ModelNotCachedError(
            f"{model_id!r} is not a Hugging Face model id (ORG/NAME, e.g. meta-llama/Llama-3.1-8B)"
        )
    cache = hub_cache_dir(env)
    repo = repo_folder(model_id, cache)
    if not repo.is_dir():
        raise ModelNotCachedError(
            f"model {model_id} is not in the local Hugging Face cache (searched {repo}; "
            "set HF_HUB_CACHE or HF_HOME, or download its config.json first)"
        )
    snapshot, commit = _snapshot(repo, revision)
    if not inside(snapshot, repo):
        raise ModelNotCachedError(f"{repo.name}'s snapshot {commit} leads outside the cache")
    if not (snapshot / "config.json").is_file():
        raise ModelNotCachedError(
            f"model {model_id} at {revision} has no config.json in the cache (searched {snapshot})"
        )
    return snapshot, commit


def import_cached_model(
    model_id: str,
    revision: str = "main",
    *,
    mtp: bool = False,
    env: Mapping[str, str] | None = None,
) -> CachedModel:
    """Import ``model_id`` from the cache: its config, and the safetensors headers present.

    Raises :class:`ModelNotCachedError` when absent, ``ConfigImportError`` /
    ``SafetensorsError`` for a malformed file.
    """
    snapshot, commit = find_cached_model(model_id, revision, env)
    repo = repo_folder(model_id, hub_cache_dir(env))
    imported = import_model_folder(snapshot, mtp=mtp, within=repo)
    return CachedModel(model_id, snapshot, commit, imported)


def list_cached_models(env: Mapping[str, str] | None = None) -> list[str]:
    """Ids of the cached models whose ``main`` snapshot has a config.json, sorted."""
    cache = hub_cache_dir(env)
    if not cache.is_dir():
        return []
    out: list[str] = []
    for repo in sorted(cache.glob("models--*")):
        model_id = repo.name.removeprefix("models--").replace("--", "/", 1)
        try:
            find_cached_model(model_id, "main", env)
        except ModelNotCachedError:
            continue
        out.append(model_id)
    return out
