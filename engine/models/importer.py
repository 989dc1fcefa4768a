"""Import a local model folder: config.json, safetensors headers, and their cross-check.

Either file alone is useful (a config gives the architecture, the headers give exact
stored counts); when both are present the user learns at once whether the config
describes the weights they hold, which catches wrong revisions and edited configs.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from engine.models.hf_config import load_hf_config
from engine.models.safetensors_index import (
    CrossCheck,
    SafetensorsError,
    StoredInventory,
    cross_check,
    read_checkpoint,
)
from engine.models.spec import ArchitectureSpec


@dataclass(frozen=True, slots=True)
class FolderImport:
    """What a model folder yielded; ``check`` is set only when both parts were present."""

    spec: ArchitectureSpec | None
    stored: StoredInventory | None
    check: CrossCheck | None


def import_model_folder(folder: str | Path) -> FolderImport:
    """Read ``config.json`` and/or the safetensors headers of ``folder`` and compare them.

    Raises ``ConfigImportError`` or ``SafetensorsError`` for a malformed file, and
    ``SafetensorsError`` when the folder holds neither.
    """
    root = Path(folder)
    if not root.is_dir():
        raise SafetensorsError(f"{root} is not a folder")
    spec = load_hf_config(root) if (root / "config.json").is_file() else None
    has_weights = (root / "model.safetensors").is_file() or (
        root / "model.safetensors.index.json"
    ).is_file()
    stored = read_checkpoint(root) if has_weights else None
    if spec is None and stored is None:
        raise SafetensorsError(
            f"{root} holds no config.json, model.safetensors or model.safetensors.index.json"
        )
    check = cross_check(spec, stored) if spec is not None and stored is not None else None
    return FolderImport(spec, stored, check)
