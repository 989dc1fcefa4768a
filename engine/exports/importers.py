"""Import a file or folder into a plan: which kind it is, and the importer that reads it.

Five kinds: a DeepSpeed ds_config (JSON), an accelerate config (YAML; its
``deepspeed_config_file`` is read from beside it), a torchtitan recipe / overrides /
TOML, a Megatron-LM argument list or launch script, and a Hugging Face model (a
``config.json``, or a folder with it and/or safetensors). The framework kinds import over
a base plan (the fields the file does not state stay the base's); a model replaces the
base plan's model.

Files are read with the plan loader's limits (``fileio.bounded_read``, ``strict_json``),
and :func:`import_file` promises one-sentence refusals and a plan that reopens
(``import_guard``).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from engine.exports.acc_import import import_accelerate
from engine.exports.common import Imported
from engine.exports.ds_import import import_deepspeed
from engine.exports.flat_yaml import read_flat_yaml
from engine.exports.import_guard import ImportRefused, one_line, prove_reopens, refusal, tidy
from engine.exports.mlm_import import import_megatron
from engine.exports.titan_import import import_torchtitan
from engine.fileio.bounded_read import MAX_CONFIG_BYTES, inside, read_text
from engine.fileio.strict_json import loads_config
from engine.models.hf_config import read_hf_config
from engine.models.importer import import_model_folder
from engine.plan import Plan
from engine.sections.model import ModelSection

__all__ = ["KINDS", "ImportRefused", "detect_kind", "import_file", "import_model"]

KINDS: dict[str, str] = {
    "deepspeed": "DeepSpeed ds_config (JSON)",
    "accelerate": "accelerate config (YAML)",
    "torchtitan": "torchtitan recipe, --section.key overrides or TOML",
    "megatron": "Megatron-LM arguments or launch script",
    "hf": "Hugging Face config.json or model folder",
}

MAX_CONFIG_LINES = 10_000
"""The most lines a YAML, TOML, recipe or launch script may have (real ones have tens).
Their parsers (``ast``, ``tomllib``, ``shlex``) take seconds for the half a million
short lines that fit in 1 MiB, and ``ast.parse`` cannot be interrupted while it runs."""


def detect_kind(path: Path, text: str | None) -> str:
    """Which of :data:`KINDS` a file (or folder) is, from its name and content."""
    if path.is_dir():
        return "hf"
    suffix = path.suffix.lower()
    body = text or ""
    if suffix == ".json":
        try:
            doc = loads_config(body, path.name)
        except ValueError:  # its importer says what is wrong with it
            return "hf" if path.name.lower() == "config.json" else "deepspeed"
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
    """The ds_config an accelerate YAML points at, read from beside the YAML: a path that
    leads out of the YAML's folder is not followed (the file of that name beside the YAML
    is read instead, if there is one)."""
    try:
        ds = read_flat_yaml(text).get("deepspeed_config") or {}
    except ValueError:
        return {}
    name = ds.get("deepspeed_config_file") if isinstance(ds, dict) else None
    if not name or not isinstance(name, str):
        return {}
    folder = path.parent
    target = Path(name) if Path(name).is_absolute() else folder / name
    if not inside(target, folder):
        target = folder / Path(name).name
    if not target.exists():
        return {}
    return {name: read_text(target, MAX_CONFIG_BYTES, folder)}


def import_model(path: Path, base: Plan) -> Imported:
    """The base plan with the model of a config.json or model folder."""
    folder = path if path.is_dir() else None
    res: list[str] = []
    warn: list[str] = []
    if folder is not None:
        found = import_model_folder(folder)
        spec, kept = found.spec, found.config
        res += found.resolutions
        warn += found.notes
        if found.check is not None and not found.check.ok:
            warn.append("the config does not describe the checkpoint it sits beside")
            warn += found.check.messages()[:4]
    else:
        got = read_hf_config(path)
        spec, kept = got.spec, got.config
        warn += got.notes
    if spec is None:
        raise ValueError(f"{path.name} holds no config.json to build the architecture from")
    # a model folder, or the folder a config.json sits in, names the model; a config saved
    # under its own name (``Llama-3.1-8B_config.json``) names it itself
    loose = folder is None and path.name.lower() != "config.json"
    name = (path.name if folder else path.stem if loose else path.parent.name) or "imported model"
    model = ModelSection(name=one_line(name, 200), preset=None, architecture=spec, hf_config=kept)
    tree = base.model_dump(mode="json")
    tree["model"] = model.model_dump(mode="json")
    return Imported(Plan.model_validate(tree), tuple(res), tuple(warn))


def _import(p: Path, base: Plan, kind: str | None, function: str | None) -> Imported:
    if not p.exists():
        raise ValueError(f"{p.name} does not exist")
    text = None if p.is_dir() else read_text(p, MAX_CONFIG_BYTES)
    kind = kind or detect_kind(p, text)
    if kind == "hf":
        return import_model(p, base)
    if text is None:
        raise ValueError(f"{p.name} is a folder; a {KINDS.get(kind, kind)} is a file")
    lines = text.count("\n")
    if kind != "deepspeed" and lines > MAX_CONFIG_LINES:
        raise ValueError(
            f"{p.name} has {lines:,} lines; no {KINDS.get(kind, kind)} has over "
            f"{MAX_CONFIG_LINES:,}"
        )
    if kind == "deepspeed":
        return import_deepspeed(text, base)
    if kind == "accelerate":
        return import_accelerate(text, base, _companions(p, text))
    if kind == "torchtitan":
        return import_torchtitan(text, base, function)
    if kind == "megatron":
        return import_megatron(text, base, one_line(p.stem, 80))
    raise ValueError(f"unknown kind {kind!r}; choose {', '.join(KINDS)}")


def import_file(path: str | Path, base: Plan, kind: str | None = None) -> Imported:
    """Import ``path`` (of ``kind``, or detected) over ``base``; ``FILE::function``
    names the recipe function of a torchtitan ``config_registry.py``.

    Raises only :class:`ImportRefused` (a ``ValueError``): one sentence naming the file.
    The plan returned is proven to save and reopen; its notes are one printable line each.
    """
    p = Path(path)
    function = None
    if "::" in p.name and not p.exists():  # FILE::function names a recipe function
        stem, _, function = p.name.rpartition("::")
        p = p.with_name(stem)
    name = one_line(p.name or str(p), 80)
    try:
        got = _import(p, base, kind, function)
        prove_reopens(got.plan, name)
    except Exception as exc:  # every failure, even MemPlan's own, is one sentence
        raise refusal(name, exc) from exc
    return tidy(got)
