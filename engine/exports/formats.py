"""The export formats: each one's exporter, the fields it carries, and its importer.

One table, so the CLI, the window and the round-trip test cannot disagree about what a
format is. ``read`` takes the file's text, the plan to import over, and the companion
files (name → text) the main file points at (accelerate's ``deepspeed_config_file``).
Each importer is imported when a file is read: writing a config (the report prints
two) needs none of the readers (nor ``tomllib`` for torchtitan's).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace

import engine.exports.accelerate as accelerate
import engine.exports.deepspeed as deepspeed
import engine.exports.megatron as megatron
import engine.exports.torchtitan as torchtitan
from engine.exports.common import Export, Imported
from engine.exports.fit_note import with_fit_warning
from engine.exports.peft_snippet import peft_snippet
from engine.plan import Plan

Reader = Callable[[str, Plan, Mapping[str, str]], Imported]


@dataclass(frozen=True, slots=True)
class Format:
    """One framework config format."""

    name: str
    label: str
    write: Callable[[Plan], Export]
    expressed: Callable[[Plan], frozenset[str]]
    read: Reader

    def export(self, plan: Plan) -> Export:
        """The export, with the PEFT snippet beside it for LoRA / QLoRA plans and a
        warning when the plan does not fit."""
        exp = with_fit_warning(self.write(plan), plan)
        snippet = peft_snippet(plan)
        if snippet is None:
            return exp
        advice = (*exp.advice, f"LoRA / QLoRA settings: {snippet.filename} (beside this file)")
        return replace(exp, extras=(*exp.extras, snippet), advice=advice)


def _ds(text: str, base: Plan, companions: Mapping[str, str]) -> Imported:
    from engine.exports.ds_import import import_deepspeed

    return import_deepspeed(text, base)


def _acc(text: str, base: Plan, companions: Mapping[str, str]) -> Imported:
    from engine.exports.acc_import import import_accelerate

    return import_accelerate(text, base, companions)


def _titan(text: str, base: Plan, companions: Mapping[str, str]) -> Imported:
    from engine.exports.titan_import import import_torchtitan

    return import_torchtitan(text, base)


def _mlm(text: str, base: Plan, companions: Mapping[str, str]) -> Imported:
    from engine.exports.mlm_import import import_megatron

    return import_megatron(text, base)


FORMATS: dict[str, Format] = {
    "megatron": Format(
        "megatron", "Megatron-LM", megatron.export_megatron, megatron.expressed, _mlm
    ),
    "torchtitan": Format(
        "torchtitan", "torchtitan", torchtitan.export_torchtitan, torchtitan.expressed, _titan
    ),
    "accelerate": Format(
        "accelerate", "accelerate", accelerate.export_accelerate, accelerate.expressed, _acc
    ),
    "deepspeed": Format(
        "deepspeed", "DeepSpeed", deepspeed.export_deepspeed, deepspeed.expressed, _ds
    ),
}


def import_export(fmt: str, exp: Export, base: Plan) -> Imported:
    """Read an export back over ``base`` (its companion files included)."""
    return FORMATS[fmt].read(exp.text, base, {s.filename: s.text for s in exp.extras})
