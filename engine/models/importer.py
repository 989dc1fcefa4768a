"""Import a local model folder: config.json, safetensors headers, and their cross-check.

Either file alone is useful (a config gives the architecture, the headers give exact
stored counts); when both are present the user learns at once whether the config
describes the weights they hold, which catches wrong revisions and edited configs.

One rule of transformers' loader is applied here because it changes the count: a config
that ties the output head to the embedding, over a checkpoint that stores a separate
``lm_head.weight``, is loaded untied (``PreTrainedModel.tie_weights`` does not tie two
tensors that are both present and differ), so the spec is untied too, with a note —
and so is the config kept for the plan (``FolderImport.config``), which the trace builds
from without the weights, so it must say what the loader would build.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.models.hf_config import import_hf_config, read_config_dict, resolve_auto_dtype
from engine.models.safetensors_index import (
    CrossCheck,
    SafetensorsError,
    StoredInventory,
    cross_check,
    read_checkpoint,
)
from engine.models.spec import ArchitectureSpec

_HEAD_NAMES = ("lm_head.weight", "embed_out.weight")


@dataclass(frozen=True, slots=True)
class FolderImport:
    """What a model folder yielded; ``check`` is set only when both parts were present.

    ``config`` is the config.json the spec describes (``ConfigImport.config``, untied
    like the spec when the checkpoint stores its own head), for ``model.hf_config``.
    """

    spec: ArchitectureSpec | None
    stored: StoredInventory | None
    check: CrossCheck | None
    notes: tuple[str, ...] = ()
    config: dict[str, Any] | None = None
    resolutions: tuple[str, ...] = ()  # "auto" values read from the checkpoint


def _has_weights(root: Path) -> bool:
    """Whether the folder holds weights (of any file type: a FIFO named
    model.safetensors is refused by the reader, not taken for absent)."""
    return (root / "model.safetensors").exists() or (root / "model.safetensors.index.json").exists()


def _untied_if_stored(
    spec: ArchitectureSpec, stored: StoredInventory
) -> tuple[ArchitectureSpec, str | None]:
    if not spec.tied_embeddings or not any(t.name.endswith(_HEAD_NAMES) for t in stored.tensors):
        return spec, None
    note = (
        "the config ties the output head to the embedding but the checkpoint stores its own "
        "lm_head.weight, which transformers then loads untied: counted untied"
    )
    return spec.model_copy(update={"tied_embeddings": False}), note


def import_model_folder(
    folder: str | Path, *, mtp: bool = False, within: Path | None = None
) -> FolderImport:
    """Read ``config.json`` and/or the safetensors headers of ``folder`` and compare them.

    Shards named by an index but not downloaded (a cache holding only the config and the
    index) skip the cross-check with a note. ``torch_dtype: "auto"`` is the dtype the
    checkpoint stores (assumed bf16, with a note, when there are no weights to read); a
    corrupt header is refused, never skipped. ``within``: a folder no file read may
    resolve outside (a hub cache's repo folder, whose snapshots link into its blobs).
    Raises ``ConfigImportError`` or ``SafetensorsError`` for a malformed file, and
    ``SafetensorsError`` when the folder holds neither.
    """
    root = Path(folder)
    if not root.is_dir():
        raise SafetensorsError(f"{root.name or root} is not a folder")
    notes: list[str] = []
    resolutions: list[str] = []
    spec: ArchitectureSpec | None = None
    config: dict[str, Any] | None = None
    has_config = (root / "config.json").exists()
    raw = read_config_dict(root / "config.json", within) if has_config else None
    stored: StoredInventory | None = None
    if _has_weights(root):
        try:
            stored = read_checkpoint(root, within)
        except SafetensorsError as exc:
            if raw is None or "which is missing" not in str(exc):
                raise
            notes.append(f"no checkpoint cross-check: {exc}")
    if raw is not None:
        cfg, said, guessed = resolve_auto_dtype(raw, stored.by_dtype if stored else None)
        imported = import_hf_config(cfg, mtp=mtp)
        spec, config = imported.spec, dict(imported.config)
        notes += [said] if said and guessed else []
        resolutions += [said] if said and not guessed else []
        notes += imported.notes
    if spec is None and stored is None:
        raise SafetensorsError(
            f"{root.name or root} holds no config.json, model.safetensors or "
            "model.safetensors.index.json"
        )
    check = None
    if spec is not None and stored is not None:
        spec, note = _untied_if_stored(spec, stored)
        if note:
            notes.append(note)
            config = {**(config or {}), "tie_word_embeddings": False}
        check = cross_check(spec, stored)
    return FolderImport(spec, stored, check, tuple(notes), config, tuple(resolutions))
