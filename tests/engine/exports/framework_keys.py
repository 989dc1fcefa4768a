"""Parsers that know each framework's real key vocabulary, from the vendored key lists.

``tests/data/framework_keys/*.json`` hold key names only (no code), extracted from the
frameworks' source at the version and commit each file records: DeepSpeed 0.19.6
(pydantic config fields and aliases, the keys ``runtime/config.py`` reads), accelerate
1.15.0 (``ClusterConfig`` fields, the ``accelerate launch`` option groups), torchtitan 0.3.0
(the config dataclasses' fields) and Megatron-LM main (every ``add_megatron_arguments``
option). Each checker returns the keys of an exported file that the framework would not
know, with their place, so a test failure names them.
"""

from __future__ import annotations

import ast
import json
from functools import cache
from pathlib import Path
from typing import Any

from engine.exports.flat_yaml import read_flat_yaml
from engine.exports.mlm_import import parse_args

DATA = Path(__file__).resolve().parents[2] / "data" / "framework_keys"


@cache
def vocabulary(framework: str) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads((DATA / f"{framework}.json").read_text(encoding="utf-8"))
    return doc


def deepspeed_unknown(text: str) -> list[str]:
    v = vocabulary("deepspeed")
    cfg = json.loads(text)
    bad = [k for k in cfg if k not in v["top"]]
    for sect in ("bf16", "fp16", "activation_checkpointing", "aio", "data_types", "torch_autocast"):
        bad += [f"{sect}.{k}" for k in cfg.get(sect, {}) if k not in v[sect]]
    z = cfg.get("zero_optimization", {})
    bad += [f"zero_optimization.{k}" for k in z if k not in v["zero_optimization"]]
    for sect in ("offload_param", "offload_optimizer"):
        bad += [f"{sect}.{k}" for k in z.get(sect, {}) if k not in v[sect]]
    if "optimizer" in cfg:
        bad += [f"optimizer.{k}" for k in cfg["optimizer"] if k not in ("type", "params")]
    return bad


def accelerate_unknown(text: str) -> list[str]:
    v = vocabulary("accelerate")
    cfg = read_flat_yaml(text)
    bad = [k for k in cfg if k not in v["top"]]
    for sect in ("deepspeed_config", "fsdp_config", "parallelism_config"):
        bad += [f"{sect}.{k}" for k in cfg.get(sect, {}) if k not in v[sect]]
    if cfg.get("distributed_type") not in v["distributed_type"]:
        bad.append(f"distributed_type={cfg.get('distributed_type')}")
    return bad


def torchtitan_unknown(text: str) -> list[str]:
    """Every ``config.<section>.<key>`` assignment of a recipe, against the dataclasses."""
    v = vocabulary("torchtitan")
    bad = []
    for node in ast.walk(ast.parse(text)):
        if not isinstance(node, ast.Assign):
            continue
        parts = ast.unparse(node.targets[0]).split(".")
        if parts[0] != "config" or len(parts) < 2:
            continue
        if parts[1] not in v["trainer"] or (
            len(parts) == 3 and parts[2] not in v.get(parts[1], [])
        ):
            bad.append(".".join(parts[1:]))
        if len(parts) == 3 and parts[1] == "training":
            val = ast.literal_eval(node.value)
            for key in ("mixed_precision_param", "mixed_precision_reduce"):
                if parts[2] == key and val not in v[key]:
                    bad.append(f"training.{key}={val}")
    return bad


def megatron_unknown(text: str) -> list[str]:
    """Every flag of a Megatron command, against ``add_megatron_arguments``; a bare flag
    must be a flag there and a valued one must take a value."""
    options = vocabulary("megatron")["options"]
    args, _ = parse_args(text)
    bad = []
    for k, val in args.items():
        kind = options.get(k)
        if kind is None:
            bad.append(k)
        elif (val is True) != (kind == "flag"):
            bad.append(f"{k} ({'bare' if val is True else 'valued'}, Megatron: {kind})")
    return bad


UNKNOWN = {
    "deepspeed": deepspeed_unknown,
    "accelerate": accelerate_unknown,
    "torchtitan": torchtitan_unknown,
    "megatron": megatron_unknown,
}
