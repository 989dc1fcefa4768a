"""Where model architectures come from: presets and Hugging Face imports.

The preset catalogue (``engine.models.presets``) and the importers
(``engine.models.hf_config``, ``engine.models.safetensors_index``) are built in parallel
with the GUI; this module is the one integration point. Each function uses the engine
module when it is importable and otherwise falls back to what this build really has —
the built-in Llama-3.1-8B and manual entry — never to made-up numbers.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from types import ModuleType
from typing import Any

from engine.models.spec import ArchitectureSpec
from engine.sections.model import LLAMA_31_8B

BUILTIN_KEY = "llama-3.1-8b"
BUILTIN: dict[str, tuple[str, ArchitectureSpec]] = {BUILTIN_KEY: ("Llama-3.1-8B", LLAMA_31_8B)}


def _module(name: str) -> ModuleType | None:
    try:
        return importlib.import_module(name)
    except ImportError:
        return None


def _function(module: str, *names: str) -> Callable[..., Any] | None:
    mod = _module(module)
    for name in names:
        fn = getattr(mod, name, None) if mod is not None else None
        if callable(fn):
            return fn
    return None


def list_presets() -> list[tuple[str, str]]:
    """(key, display name) of every model preset this build knows."""
    lister = _function("engine.models.presets", "list_presets")
    loader = _function("engine.models.presets", "load_preset")
    if lister is None or loader is None:
        return [(key, name) for key, (name, _) in BUILTIN.items()]
    out = []
    for item in lister():
        key = item if isinstance(item, str) else str(getattr(item, "key", item))
        display = getattr(item, "name", None) or getattr(item, "display_name", None) or key
        out.append((key, str(display)))
    return out


def load_preset(key: str) -> tuple[str, ArchitectureSpec]:
    """(display name, architecture) of a preset; ``KeyError`` for an unknown key."""
    loader = _function("engine.models.presets", "load_preset")
    if loader is not None:
        name, spec = loader(key)
        return str(name), spec
    return BUILTIN[key]


def hf_config_importer() -> Callable[[str], tuple[str, ArchitectureSpec]] | None:
    """The HF ``config.json`` importer, or None when this build has none."""
    return _function("engine.models.hf_config", "load_hf_config", "from_config_file",
                     "load_config")


def safetensors_importer() -> Callable[[str], tuple[str, ArchitectureSpec]] | None:
    """The safetensors-folder importer, or None when this build has none."""
    return _function("engine.models.safetensors_index", "load_safetensors_folder",
                     "from_folder", "load_folder")


def model_changes(key: str | None, name: str, spec: ArchitectureSpec) -> dict[str, Any]:
    """The plan changes that put an architecture into the Model section, as one step."""
    return {
        "model.name": name,
        "model.preset": key,
        "model.architecture": spec.model_dump(mode="json"),
    }


def run_import(importer: Callable[..., Any], path: str) -> tuple[str, ArchitectureSpec]:
    """Call an importer and normalise its answer to (display name, architecture)."""
    result = importer(path)
    if isinstance(result, ArchitectureSpec):
        return path.rstrip("/").split("/")[-1], result
    name, spec = result[0], result[1]
    if not isinstance(spec, ArchitectureSpec):
        spec = ArchitectureSpec.model_validate(spec)
    return str(name), spec
