"""What every export and import shares: the result types and the batch geometry.

The contract (issue 16): an export returns its text and every plan input it could not
say (:class:`Unexpressed`, each naming its field path); an import returns a plan, the
``"auto"`` values it resolved, and a warning for every memory-relevant key it did not
understand. ``import(export(plan))`` over any base plan gives back the plan's value of
every field the export expressed, so a plan whose export lists nothing comes back whole,
with the same estimate to the byte.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine.fileio.oneline import one_line
from engine.ledger.placement import policy_split, stage_layer_ranges
from engine.ledger.sharding import shard_group_size
from engine.models.spec import ArchitectureSpec
from engine.plan import Plan

STAGE_STRATEGY: dict[int, str] = {0: "ddp", 1: "zero1", 2: "zero2", 3: "zero3"}
"""The strategy an imported ZeRO stage means (the inverse of ``StrategyRule.zero_stage``
on DDP and DeepSpeed)."""

NVME_PATH = "/local_nvme"
"""The placeholder NVMe mount written into offload sections (DeepSpeed refuses an
``nvme`` device without a path); the export says to replace it."""

TORCH_DTYPE = {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32"}
DTYPE_OF_TORCH = {v: k for k, v in TORCH_DTYPE.items()}


@dataclass(frozen=True, slots=True)
class Unexpressed:
    """A plan input the format cannot carry: its field path and why."""

    field: str
    why: str

    def __str__(self) -> str:
        return f"{self.field}: {self.why}"


@dataclass(frozen=True, slots=True)
class Snippet:
    """A companion file beside the main config (a PEFT snippet, a ds_config the
    accelerate YAML points at)."""

    filename: str
    text: str


@dataclass(frozen=True, slots=True)
class Export:
    """An exported config: its text, a suggested file name, what it could not say, the
    framework version it targets and any companion files."""

    format: str
    filename: str
    text: str
    unexpressed: tuple[Unexpressed, ...] = field(default=())
    target: str = ""
    extras: tuple[Snippet, ...] = field(default=())
    advice: tuple[str, ...] = field(default=())

    @property
    def notes(self) -> tuple[str, ...]:
        """The unexpressed inputs and the advice, as sentences (what the report and the
        CLI print)."""
        return tuple(f"not expressed: {u}" for u in self.unexpressed) + self.advice


def export_files(exp: Export, output: str | Path) -> list[tuple[Path, str]]:
    """Every file an export to ``output`` writes (the main one, then its companions
    beside it) with its text."""
    target = Path(output)
    return [(target, exp.text)] + [(target.parent / e.filename, e.text) for e in exp.extras]


def existing(paths: list[Path]) -> list[Path]:
    """The paths that already exist (a dangling symlink counts: writing follows it)."""
    return [p for p in paths if p.exists() or p.is_symlink()]


@dataclass(frozen=True, slots=True)
class Imported:
    """An imported plan, the ``auto`` values resolved (one line each) and warnings."""

    plan: Plan
    resolutions: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()


FOLLOWS: dict[str, tuple[str, ...]] = {
    "parallelism.strategy": ("parallelism.shard_group_size",),
    "parallelism.dp": ("parallelism.shard_group_size",),
}
"""Fields whose meaning rests on another: when that one is lost, so are they."""


class Gaps:
    """Collects what an export cannot say, once per field."""

    def __init__(self) -> None:
        self.items: dict[str, Unexpressed] = {}

    def add(self, path: str, why: str) -> None:
        self.items.setdefault(path, Unexpressed(path, why))
        for dependent in FOLLOWS.get(path, ()):
            self.items.setdefault(dependent, Unexpressed(dependent, f"follows {path}"))

    def __call__(self) -> tuple[Unexpressed, ...]:
        return tuple(self.items.values())


def comment_block(gaps: tuple[Unexpressed, ...], prefix: str = "# ") -> str:
    """The unexpressed inputs as comment lines (for formats that allow comments). Each
    one is made a single printable line: a reason may quote plan text (a model's name),
    and a line break there would end the comment and turn the rest into code."""
    if not gaps:
        return ""
    lines = ["MemPlan: plan inputs this file cannot express:"]
    lines += [f"  - {g}" for g in gaps]
    return comment_lines(lines, prefix)


def comment_lines(lines: list[str] | tuple[str, ...], prefix: str = "# ") -> str:
    """``lines`` as comments, each first made one printable line (:func:`one_line`; the
    leading indent kept)."""
    return "".join(f"{prefix}{ln[: len(ln) - len(ln.lstrip(' '))]}{one_line(ln)}\n" for ln in lines)


def changed_fields(old: Plan, new: Plan) -> dict[str, Any]:
    """The dotted-path changes that turn ``old`` into ``new`` (whole values where a
    section appears or disappears, e.g. a MoE block): an import as one undo step."""
    out: dict[str, Any] = {}

    def walk(a: Any, b: Any, prefix: str) -> None:
        if isinstance(a, dict) and isinstance(b, dict) and a.keys() == b.keys():
            for k in a:
                walk(a[k], b[k], f"{prefix}{k}.")
        elif a != b:
            out[prefix[:-1]] = b

    walk(old.model_dump(mode="json"), new.model_dump(mode="json"), "")
    return out


JOB_SHAPE_FIELDS: tuple[str, ...] = (
    "stack.name",
    "method.kind",
    "batch.seq_len",
    "batch.micro_batch",
    "batch.grad_accum",
    "batch.global_batch",
    "parallelism.strategy",
    "parallelism.dp",
    "parallelism.shard_group_size",
    "parallelism.tp",
)
"""The plan fields a launch recipe (Megatron script, torchtitan recipe) always carries:
who runs it, the batch and the data/tensor-parallel shape."""


def ranks_per_node(plan: Plan) -> int:
    return plan.parallelism.ranks_per_node or plan.hardware.gpus_per_node


def shard_group(plan: Plan) -> int:
    """The ranks a hybrid strategy shards over (the ledger's own rule)."""
    par = plan.parallelism
    return shard_group_size(par, par.dp, ranks_per_node(plan))


def stage_split(plan: Plan) -> list[int]:
    """Decoder layers per pipeline stage, as the ledger places them."""
    ranges = stage_layer_ranges(plan.model.architecture, plan.parallelism)
    return [len(r) for r in ranges]


def balanced_or(split: list[int], layers: int) -> tuple[int, ...] | None:
    """An imported split, or None when it is the one the ledger makes by itself under the
    default ``pp_split_policy`` "auto" (even when PP divides the layers, else weighted)."""
    return None if tuple(split) == policy_split(layers, len(split), "auto") else tuple(split)


def mixed_precision(plan: Plan) -> str:
    """'bf16', 'fp16' or 'no' — the compute dtype the frameworks call mixed precision."""
    c = plan.method.precision.compute_dtype
    return "no" if c == "fp32" else c


def as_int(v: object) -> int | None:
    """An integer config value, or None for ``auto``, booleans and absent values."""
    if isinstance(v, bool) or v is None or v == "auto":
        return None
    try:  # NaN / infinities (a TOML ``inf``, a "1e999") are no integer either
        if isinstance(v, int | float):
            return int(v)
        if isinstance(v, str):
            return int(float(v))
    except (ValueError, OverflowError):
        return None
    return None


STORAGE_PATH = "model.architecture.moe.expert_storage"


def storage_gap(arch: ArchitectureSpec, native: str, gaps: Gaps, why: str) -> None:
    """Say so when the plan's (resolved) routed-experts storage is not the one the target
    framework builds (``native``): the file cannot choose it."""
    if arch.moe is not None and arch.moe.expert_storage not in ("auto", native):
        gaps.add(STORAGE_PATH, why)


def without_storage(arch: ArchitectureSpec) -> ArchitectureSpec:
    """``arch`` with the experts' storage left to the stack (for comparing models: the
    storage changes no count)."""
    if arch.moe is None or arch.moe.expert_storage == "auto":
        return arch
    return arch.model_copy(update={"moe": arch.moe.model_copy(update={"expert_storage": "auto"})})
