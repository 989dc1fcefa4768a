"""Import a file or folder into a plan: which kind it is, and the importer that reads it.

Five kinds: a DeepSpeed ds_config (JSON), an accelerate config (YAML; its
``deepspeed_config_file`` is read from beside it), a torchtitan recipe / overrides /
TOML, a Megatron-LM argument list or launch script, and a Hugging Face model (a
``config.json``, or a folder with it and/or safetensors). The framework kinds import over
a base plan (the fields the file does not state stay the base's); a model replaces the
base plan's model.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from engine.exports.acc_import import import_accelerate
from engine.exports.common import Imported
from engine.exports.ds_import import import_deepspeed_dict
from engine.exports.flat_yaml import read_flat_yaml
from engine.exports.mlm_import import import_megatron
from engine.exports.titan_import import import_torchtitan
from engine.models.hf_config import import_hf_config
from engine.models.importer import import_model_folder
from engine.models.safetensors_index import read_checkpoint
from engine.models.spec import ArchitectureSpec
from engine.plan import Plan
from engine.sections.model import ModelSection

KINDS: dict[str, str] = {
    "deepspeed": "DeepSpeed ds_config (JSON)",
    "accelerate": "accelerate config (YAML)",
    "torchtitan": "torchtitan recipe, --section.key overrides or TOML",
    "megatron": "Megatron-LM arguments or launch script",
    "hf": "Hugging Face config.json or model folder",
}
_SAFETENSORS_DTYPE = {"BF16": "bf16", "F16": "fp16", "F32": "fp32", "F8_E4M3": "fp8_e4m3"}


def detect_kind(path: Path, text: str | None) -> str:
    """Which of :data:`KINDS` a file (or folder) is, from its name and content."""
    if path.is_dir():
        return "hf"
    suffix = path.suffix.lower()
    body = text or ""
    if suffix == ".json":
        try:
            doc = json.loads(body)
        except ValueError:
            return "deepspeed"
        return "hf" if isinstance(doc, dict) and "model_type" in doc else "deepspeed"
    if suffix in (".yaml", ".yml"):
        return "accelerate"
    if suffix == ".toml":
        return "torchtitan"
    if suffix == ".py":
        return "torchtitan"
    if "pretrain_gpt" in body or "--num-layers" in body or "--tensor-model-parallel" in body:
        return "megatron"
    if "torchtitan" in body or "--parallelism." in body or "--training." in body:
        return "torchtitan"
    if "distributed_type" in body:
        return "accelerate"
    raise ValueError(f"cannot tell what {path.name} is; name its kind ({', '.join(KINDS)})")


def _companions(path: Path, text: str) -> Mapping[str, str]:
    """The ds_config an accelerate YAML points at, read from beside the YAML."""
    try:
        ds = read_flat_yaml(text).get("deepspeed_config") or {}
    except ValueError:
        return {}
    name = ds.get("deepspeed_config_file") if isinstance(ds, dict) else None
    if not name:
        return {}
    target = Path(str(name))
    target = target if target.is_absolute() else path.parent / target
    try:
        return {str(name): target.read_text(encoding="utf-8")}
    except OSError:
        return {}


def _dtype_auto(cfg: dict[str, Any], folder: Path | None) -> tuple[dict[str, Any], str | None]:
    """``torch_dtype: "auto"`` means "as stored": read it from the safetensors headers
    when the folder has them, else assume bf16 (and say so)."""
    keys = [k for k in ("torch_dtype", "dtype") if cfg.get(k) == "auto"]
    if not keys:
        return cfg, None
    stored = None
    if folder is not None:
        try:
            inv = read_checkpoint(folder)
            by = inv.by_dtype
            stored = _SAFETENSORS_DTYPE.get(max(by, key=lambda d: by[d])) if by else None
        except (OSError, ValueError):
            stored = None
    dtype = stored or "bf16"
    why = "the checkpoint's stored dtype" if stored else "no weights to read: assumed"
    clean = {k: v for k, v in cfg.items() if k not in keys}
    clean["torch_dtype"] = {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32"}.get(
        dtype, "bfloat16"
    )
    return clean, f"torch_dtype 'auto' = {dtype} ({why})"


def import_model(path: Path, base: Plan) -> Imported:
    """The base plan with the model of a config.json or model folder."""
    folder = path if path.is_dir() else None
    cfg_path = path / "config.json" if folder else path
    res: list[str] = []
    warn: list[str] = []
    spec: ArchitectureSpec | None = None
    kept: dict[str, Any] | None = None  # the config.json the plan keeps (model.hf_config)
    if cfg_path.is_file():
        cfg = json.loads(cfg_path.read_text(encoding="utf-8"))
        if not isinstance(cfg, dict):
            raise ValueError(f"{cfg_path} must hold a JSON object")
        cfg, resolution = _dtype_auto(cfg, folder)
        if resolution:
            res.append(resolution)
        if resolution is None and folder is not None:
            found = import_model_folder(folder)
            spec, notes, kept = found.spec, list(found.notes), found.config
            if found.check is not None and not found.check.ok:
                notes.append("the config does not describe the checkpoint it sits beside")
        else:
            got = import_hf_config(cfg)
            spec, notes, kept = got.spec, list(got.notes), got.config
        warn += notes
    elif folder is not None:
        found = import_model_folder(folder)
        spec, warn, kept = found.spec, list(found.notes), found.config
    if spec is None:
        raise ValueError(f"{path} holds no config.json to build the architecture from")
    name = (path.name if folder else path.parent.name) or "imported model"
    model = ModelSection(name=name, preset=None, architecture=spec, hf_config=kept)
    tree = base.model_dump(mode="json")
    tree["model"] = model.model_dump(mode="json")
    return Imported(Plan.model_validate(tree), tuple(res), tuple(warn))


def import_file(path: str | Path, base: Plan, kind: str | None = None) -> Imported:
    """Import ``path`` (of ``kind``, or detected) over ``base``."""
    p = Path(path)
    if not p.exists():
        raise ValueError(f"{p} does not exist")
    text = None if p.is_dir() else p.read_text(encoding="utf-8")
    kind = kind or detect_kind(p, text)
    if kind == "hf":
        return import_model(p, base)
    assert text is not None
    if kind == "deepspeed":
        cfg = json.loads(text)
        if not isinstance(cfg, dict):
            raise ValueError("a ds_config must be a JSON object")
        return import_deepspeed_dict(cfg, base)
    if kind == "accelerate":
        return import_accelerate(text, base, _companions(p, text))
    if kind == "torchtitan":
        return import_torchtitan(text, base)
    if kind == "megatron":
        return import_megatron(text, base)
    raise ValueError(f"unknown kind {kind!r}; choose {', '.join(KINDS)}")
