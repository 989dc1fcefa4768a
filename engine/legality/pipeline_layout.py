"""Megatron's ``--pipeline-model-parallel-layout`` string: its grammar and its rules.

The string lists virtual pipeline stages separated by ``|``, each a run of layer letters:
``E`` the embedding, ``t`` a transformer decoder layer, ``m`` a multi-token-prediction
layer, ``L`` the loss (with the output layer); ``(…)*n`` and ``x*n`` repeat, commas are
cosmetic. ``"Et|(tt|)*29,m|L"`` is Megatron's own example. Parsing follows
``megatron/core/transformer/pipeline_parallel_layer_layout.py``
(``PipelineParallelLayerLayout.parse_str_to_list``, ``__init__``,
``validate_layer_layout``, Megatron-LM 2026-08): pp × v stages, virtual stage ``k`` on
pipeline rank ``k mod pp``; exactly one E, first; exactly one L, last; as many ``t`` as
the model has layers; the MTP layers after every decoder layer. MemPlan places the MTP
modules on the last pipeline rank, so a layout that puts them elsewhere (Megatron's
"standalone MTP") is refused with that reason.

Repetition counts are bounded before anything is expanded: a hostile ``(t|)*10**9``
is refused in one sentence instead of filling memory.
"""

from __future__ import annotations

import re
from functools import lru_cache

from engine.errors import Problem

LETTERS = frozenset("ELtm")
MAX_EXPANDED = 200_000
"""Longest layout, in letters and separators, once repetitions are unrolled."""

_GROUP = re.compile(r"\(([^()]+)\)\*(\d+)")
_SINGLE = re.compile(r"(.)\*(\d+)")
FIELDS = ("parallelism.pp_layout",)


def _unroll(pattern: re.Pattern[str], text: str) -> str | None:
    total = len(text)
    for m in pattern.finditer(text):
        digits = m.group(2)
        if len(digits) > 9:
            return None
        total += len(m.group(1)) * int(digits) - len(m.group(0))
        if total > MAX_EXPANDED:
            return None
    return pattern.sub(lambda m: m.group(1) * int(m.group(2)), text)


@lru_cache(maxsize=256)
def parse(text: str) -> tuple[str, ...] | Problem:
    """The virtual stages of a layout string, in order, or why it does not parse."""
    flat = text.replace(",", "").replace(" ", "")
    for pattern in (_GROUP, _SINGLE):
        got = _unroll(pattern, flat)
        if got is None:
            return Problem(
                FIELDS,
                f"parallelism.pp_layout unrolls to more than {MAX_EXPANDED:,} layers and "
                f"separators: shorten its repetitions",
            )
        flat = got
    bad = sorted(set(flat) - LETTERS - {"|"})
    if bad:
        shown = "".join(bad)[:20]
        return Problem(
            FIELDS,
            f"parallelism.pp_layout has characters {shown!r} Megatron does not know: use E "
            f"(embedding), t (decoder layer), m (MTP layer), L (loss), | between stages, "
            f"(…)*n to repeat",
        )
    return tuple(flat.split("|"))


def layout_problems(
    text: str | None, pp: int, virtual_stages: int, layers: int, mtp_layers: int
) -> list[Problem]:
    """Megatron's validation of a layout for this pipeline and model (empty: it runs)."""
    if text is None:
        return []
    stages = parse(text)
    if isinstance(stages, Problem):
        return [stages]
    fields = (*FIELDS, "parallelism.pp", "parallelism.virtual_stages")
    if len(stages) != pp * virtual_stages:
        return [
            Problem(
                fields,
                f"parallelism.pp_layout has {len(stages)} stages but parallelism.pp × "
                f"parallelism.virtual_stages = {pp} × {virtual_stages} = "
                f"{pp * virtual_stages}",
            )
        ]
    flat = "".join(stages)
    out: list[Problem] = []
    if flat.count("E") != 1 or not flat.startswith("E"):
        out.append(Problem(FIELDS, "parallelism.pp_layout must start with the one embedding E"))
    if flat.count("L") != 1 or not flat.endswith("L"):
        out.append(Problem(FIELDS, "parallelism.pp_layout must end with the one loss L"))
    n_t, n_m = flat.count("t"), flat.count("m")
    if n_t != layers:
        out.append(
            Problem(
                (*FIELDS, "model.architecture.layers"),
                f"parallelism.pp_layout places {n_t} decoder layers (t) but the model has "
                f"{layers} (model.architecture.layers)",
            )
        )
    if n_m != mtp_layers:
        out.append(
            Problem(
                (*FIELDS, "model.architecture.mtp_layers"),
                f"parallelism.pp_layout places {n_m} MTP layers (m) but the model has "
                f"{mtp_layers} (model.architecture.mtp_layers)",
            )
        )
    if n_m and (flat.rfind("t") > flat.find("m") or "m" not in stages[-1]):
        out.append(
            Problem(
                FIELDS,
                "parallelism.pp_layout must put the MTP layers (m) after every decoder layer "
                "and in the last stage (MemPlan keeps MTP with the loss)",
            )
        )
    return out


def stage_layers(text: str, pp: int) -> tuple[int, ...]:
    """Decoder layers (``t``) per pipeline rank: virtual stage k sits on rank k mod pp.
    Call only for a layout :func:`layout_problems` passed."""
    stages = parse(text)
    if isinstance(stages, Problem):
        raise ValueError(stages.message)
    counts = [0] * pp
    for k, stage in enumerate(stages):
        counts[k % pp] += stage.count("t")
    return tuple(counts)
