"""One point of the layout lattice, the preferences that rank points as practical, a
rejected point's reasons, the batch a point runs with and the GPUs it is bought as.

A rejected point's reasons fall in two groups a view shows apart (:func:`grouped`):
"cannot run" (engine.legality's rules, a stack's own limits, memory) and "runs, not
preferred" (:class:`LayoutPreferences`): a reader deciding what to buy needs to know
that TP 16 across two nodes is a choice, where TP 3 with 32 heads is impossible. The
preference messages are recognised by phrases of their wording
(:data:`PREFERENCE_PHRASES`, from ``shapes`` and ``candidates``); the test re-judges
layouts with no preferences (``LayoutPreferences.none()``) so a reworded message cannot
slip through.

A purchase comes in the shapes the hardware is sold in: whole nodes of the chosen node
preset, or — for a job smaller than one node — a single GPU or a partial node. A 1-GPU
QLoRA job runs on a workstation or one cloud GPU; rounding it to "one node × 8 GPUs,
7 idle" is not what its owner buys. Partial nodes come in powers of two up to the node
(cloud instances of the same GPU are offered as 1, 2, 4 and 8 GPUs, e.g. Google Cloud
A3 ``a3-highgpu-1g/2g/4g/8g``, A2 ``a2-highgpu-1g…8g``; workstations hold 1, 2 or 4),
so a 3-rank layout pays for 4. From one node up, whole nodes: the interconnect a
multi-node job needs is sold by the node. Under ``policy.rounding = "gpu"`` every GPU
is bought alone (exact ranks); under ``"whole_node"`` — set by a node preset sold only
whole, such as the DGX A100, which NVIDIA's datasheet offers as one 8-GPU system — even
a 1-rank job pays for a node. The cost is monotone in the ranks, which the search's
soundness needs (:func:`engine.layout.minimum.search_growing` bisects on it).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from engine.errors import Problem
from engine.legality import rules
from engine.plan import Plan


@dataclass(frozen=True, slots=True)
class LayoutPreferences:
    """Which legal layouts count as practical. Defaults are the ones the counts use.

    None of these is a hard rule (those are :mod:`engine.legality`'s): each only ranks a
    layout out of the practical search, and :meth:`relaxed` drops the topology ones.

    - ``tp_within_node``: TP all-reduces every layer, so it stays on NVLink (one node).
    - ``tp_power_of_two``: kernels and head splits are tuned for powers of two.
    - ``kv_replication``: allow TP larger than the KV heads (each KV head replicated on
      TP ÷ KV ranks, as Megatron-LM and torchtitan do); False asks for whole KV heads.
    - ``pp_regular``: PP is a power of two or splits the layers into equal stages, with
      or without the embedding and the output counted as one layer each (PP 16 for
      Llama-3.1-405B's 126 layers: 128 ÷ 16), the values pipeline users pick. No PP is
      refused for splitting unevenly: a PP that does not divide the layers gets the
      plan's split policy (by default first and last stages one layer lighter).
    - ``pipeline_full``: a PP layout keeps at least p micro-batches per step (m ≥ p, the
      1F1B schedule's minimum; with fewer the pipeline idles and holds fewer
      micro-batches than any efficient run — Narayanan et al. 2021 §2.2).
    - ``cp_power_of_two`` and ``cp_min_tokens``: context parallelism splits a sequence
      into power-of-two chunks of at least this many tokens (a ring step's attention
      must hide the next chunk's K/V transfer; default 1,024).
    - ``pp_depth_capped``: PP is at most the plan's ``policy.max_pp`` (default 16, the
      depth DeepSeek-V3 and Llama 3 405B train with), the plan's own PP excepted.
    - ``max_padding_share``: FSDP shards dim 0 into N equal chunks; once N outgrows a
      tensor's rows the gathered copies are mostly padding and grow with every rank
      added (a shard group of 16,384 over a 1,024-row K projection gathers 16×). Layouts
      whose FSDP units are padded by more than this share (default 5 %) are not
      practical: HSDP or fewer ranks are.
    """

    tp_within_node: bool = True
    tp_power_of_two: bool = True
    kv_replication: bool = True
    pp_regular: bool = True
    pipeline_full: bool = True
    cp_power_of_two: bool = True
    cp_min_tokens: int = 1024
    max_padding_share: float = 0.05
    pp_depth_capped: bool = True

    def relaxed(self) -> LayoutPreferences:
        """The preferences the arithmetic minimum drops: TP may be any divisor the heads
        allow, not only a power of two. TP stays within a node: a TP group that crosses
        nodes all-reduces every layer over the network, and no stack's recipe runs it
        (Megatron-LM's guidance keeps TP ≤ GPUs per node, Narayanan et al. 2021 §3.3), so
        a minimum of TP 32 would be a layout nobody can run. The CP token preference
        stays too: it is a preference (its reason says so and that the layout runs), but
        a minimum at CP 32 with 128 tokens per rank is not a count anyone would buy by."""
        return replace(self, tp_power_of_two=False)

    @staticmethod
    def hard_rules_only() -> LayoutPreferences:
        """No preference at all: a layout is legal exactly when engine.legality says so."""
        return LayoutPreferences(
            tp_within_node=False,
            tp_power_of_two=False,
            kv_replication=True,
            pp_regular=False,
            pipeline_full=False,
            cp_power_of_two=False,
            cp_min_tokens=1,
            max_padding_share=1.0,
            pp_depth_capped=False,
        )


def split_words(split: tuple[int, ...]) -> str:
    """A split in few characters, runs folded: (3, 4, 4, 4, 2) → "3,4×3,2"."""
    out: list[str] = []
    i = 0
    while i < len(split):
        j = i
        while j + 1 < len(split) and split[j + 1] == split[i]:
            j += 1
        out.append(f"{split[i]}×{j - i + 1}" if j > i else f"{split[i]}")
        i = j + 1
    return ",".join(out)


@dataclass(frozen=True, slots=True, order=True)
class Layout:
    """One point of the lattice with the batch geometry it implies."""

    tp: int
    pp: int
    cp: int
    ep: int
    dp: int
    micro_batch: int = 1
    grad_accum: int = 1
    etp: int = 1  # expert TP (MoE models), folded with EP over TP × CP × DP
    pp_split: tuple[int, ...] | None = None  # decoder layers per stage; None = equal

    def at_dp(self, dp: int, micro_batch: int, grad_accum: int) -> Layout:
        """This shape at ``dp`` data-parallel ranks running this batch: what
        ``dataclasses.replace`` gives, built directly (the search builds one per candidate
        DP of every shape, thousands per search; ``tests/bench_engine.py`` prints what
        ``replace`` would cost)."""
        return Layout(
            self.tp, self.pp, self.cp, self.ep, dp, micro_batch, grad_accum, self.etp, self.pp_split
        )

    @property
    def world_size(self) -> int:
        """TP × PP × CP × DP: EP and expert TP fold over the same ranks."""
        return self.tp * self.pp * self.cp * self.dp

    @property
    def model_parallel(self) -> int:
        """Ranks one model replica spans besides DP: TP × PP × CP."""
        return self.tp * self.pp * self.cp

    @property
    def global_batch(self) -> int:
        """Micro-batch × accumulation × DP: each DP replica consumes its own micro-batches."""
        return self.micro_batch * self.grad_accum * self.dp

    @property
    def shape(self) -> tuple[int, int, int, int]:
        return (self.tp, self.pp, self.cp, self.ep)

    def label(self) -> str:
        split = f" [{split_words(self.pp_split)}]" if self.pp_split else ""
        return (
            f"TP{self.tp} PP{self.pp}{split} CP{self.cp} EP{self.ep} DP{self.dp} "
            f"(mb {self.micro_batch} × ga {self.grad_accum})"
        )

    def preference(self) -> tuple[int, int, int, int, int]:
        """Sort key: least model parallelism first (it costs throughput), then TP
        before CP before PP (TP stays on NVLink; PP adds bubbles), then the least EP
        (fewest all-to-all peers)."""
        return (self.model_parallel, self.pp, self.cp, -self.tp, self.ep)


@dataclass(frozen=True, slots=True)
class Rejected:
    """A layout that cannot run (or is not practical), with every reason."""

    layout: Layout
    reasons: tuple[str, ...]


def is_pow2(n: int) -> bool:
    return n > 0 and n & (n - 1) == 0


PREFERENCE_PHRASES: tuple[str, ...] = (
    "(whole KV heads per rank preferred)",  # kv_replication
    "is not a power of two",  # tp_power_of_two, cp_power_of_two
    "does not fit evenly inside one node of",  # tp_within_node
    "not preferred: CP",  # cp_min_tokens
    "the pipeline needs m ≥ p",  # pipeline_full
    "is deeper than policy.max_pp",  # pp_depth_capped
    "is neither a power of two nor an even split",  # pp_regular
    "pads a unit's gathered copy",  # max_padding_share
)

RULES_TITLE = "Cannot run (a rule, the stack or memory)"
PREFERENCES_TITLE = "Runs, but not preferred (a preference only)"


def is_preference(reason: str) -> bool:
    """Whether ``reason`` is a preference's (a layout that would run), not a rule's."""
    return any(phrase in reason for phrase in PREFERENCE_PHRASES)


def preference_only(rejected: Rejected) -> bool:
    """Whether every reason ``rejected`` has is a preference: the layout would run."""
    return all(is_preference(r) for r in rejected.reasons)


def grouped(rejected: Sequence[Rejected]) -> tuple[list[Rejected], list[Rejected]]:
    """(rejected by a rule, rejected by preferences only), each in the given order."""
    rules = [r for r in rejected if not preference_only(r)]
    prefs = [r for r in rejected if preference_only(r)]
    return rules, prefs


def target_global_batch(plan: Plan) -> int:
    """The global batch the plan asks for: explicit, or micro × accumulation × replicas."""
    b, par = plan.batch, plan.parallelism
    if b.global_batch is not None:
        return b.global_batch
    return b.micro_batch * b.grad_accum * par.dp


def keeps_global_batch(plan: Plan) -> bool:
    """True when a new layout must keep the plan's global batch: the plan holds it, or
    the user set it. A global batch typed in is a training hyperparameter (the learning
    rate and schedule were tuned for it), so a layout raises grad_accum to keep it rather
    than letting it follow DP — whatever ``hold_fixed`` says about the micro-batch."""
    b = plan.batch
    return b.hold_fixed == "global_batch" or b.global_batch is not None


def held_batch(plan: Plan) -> int | None:
    """The global batch every layout must keep, or None when only the micro-batch is
    held (no global batch set: it then follows DP, and every layout row shows it)."""
    return target_global_batch(plan) if keeps_global_batch(plan) else None


def batch_for(plan: Plan, dp: int, pp: int = 1) -> tuple[int, int] | Problem:
    """(micro-batch, accumulation) for DP replicas and PP stages, or why the batch is
    unreachable.

    With ``hold_fixed = global_batch`` the global batch stays and accumulation absorbs
    the change (a pipeline that then gets fewer than p micro-batches is judged by the
    ``pipeline_full`` preference). With ``micro_batch`` the micro-batch stays and
    accumulation is the plan's, raised to p for a pipeline of p stages — the schedule's
    minimum m ≥ p, without which 1F1B idles and holds fewer micro-batches than any
    efficient run; the global batch follows.
    """
    b = plan.batch
    held = held_batch(plan)
    if held is None:
        return b.micro_batch, max(b.grad_accum, pp) if pp > 1 else b.grad_accum
    unreachable = rules.global_batch_reachable(held, b.micro_batch, dp)
    if unreachable:
        return unreachable
    return b.micro_batch, held // (b.micro_batch * dp)


def accumulation_words(plan: Plan, pp: int, grad_accum: int) -> str:
    """Why a layout runs ``grad_accum`` micro-batches per step, for a count's reason."""
    held = held_batch(plan)
    if held is not None:
        return f"grad_accum {grad_accum} reaches the held global batch {held:,}"
    if pp > 1 and grad_accum > plan.batch.grad_accum:
        return f"grad_accum {grad_accum} = the pipeline schedule's minimum m ≥ p = {pp}"
    return f"grad_accum {grad_accum} as the plan sets it"


def step_words(global_batch: int, seq_len: int) -> str:
    """A layout's global batch and tokens per step, as every layout row shows them."""
    return f"{global_batch:,} seq × {seq_len:,} = {global_batch * seq_len:,} tokens/step"


def batch_change(plan: Plan, global_batch: int) -> str:
    """What running a layout of ``global_batch`` sequences does to the plan's step, in
    words ("" when it keeps it): a layout whose DP differs moves the global batch when
    only the micro-batch is held, and a reader must see that before applying it."""
    now = target_global_batch(plan)
    if global_batch == now:
        return ""
    s = plan.batch.seq_len
    return (
        f"changes the global batch {now:,} → {global_batch:,} "
        f"({now * s:,} → {global_batch * s:,} tokens/step): set batch.global_batch to keep it"
    )


def partial_shapes(gpus_per_node: int) -> tuple[int, ...]:
    """The sizes smaller than one node a purchase may take: powers of two below it."""
    out, n = [], 1
    while n < gpus_per_node:
        out.append(n)
        n *= 2
    return tuple(out)


def procurement(world_size: int, gpus_per_node: int, rounding: str) -> int:
    """GPUs paid for to run ``world_size`` ranks: exact GPUs, or the smallest shape the
    hardware is sold in (a single GPU, a partial node, whole nodes)."""
    if rounding == "gpu":
        return world_size
    if world_size <= gpus_per_node and rounding != "whole_node":
        return next((s for s in partial_shapes(gpus_per_node) if s >= world_size), gpus_per_node)
    return -(-world_size // gpus_per_node) * gpus_per_node


def shape_words(gpus: int, gpus_per_node: int, rounding: str) -> str:
    """The purchase's shape and the rounding that made it, in words, after its count
    ("16 GPUs = 2 nodes × 8 (rounded to whole nodes)")."""
    if rounding == "gpu":
        return f"{gpus:,} GPU{'s' if gpus != 1 else ''}: single GPUs (policy.rounding = gpu)"
    whole = rounding == "whole_node"
    if gpus == 1 and not whole:
        return "1 GPU: a single GPU (a workstation or one cloud GPU), no node to fill"
    if gpus < gpus_per_node and not whole:
        return (
            f"{gpus} GPUs: a partial node ({gpus} of {gpus_per_node} per node; below one "
            f"node a purchase rounds up to {', '.join(map(str, partial_shapes(gpus_per_node)))} "
            f"GPUs)"
        )
    nodes = gpus // gpus_per_node
    return (
        f"{gpus:,} GPUs = {nodes:,} node{'s' if nodes != 1 else ''} × {gpus_per_node} "
        f"(rounded to whole nodes{'; the node is sold whole' if whole else ''})"
    )


def shape_only(gpus: int, gpus_per_node: int, rounding: str) -> str:
    """The shape without the count, for a sentence that names it first ("Buy 16 ×
    H100: 2 nodes × 8 (rounded to whole nodes)")."""
    words = shape_words(gpus, gpus_per_node, rounding)
    for cut in (": ", " = "):
        if cut in words:
            return words.split(cut, 1)[1]
    return words


def rounding_noun(rounding: str) -> str:
    """The unit a purchase rounds to, as a plural noun ("nodes", "GPUs", "whole nodes
    (sold whole)") for "rounding to …" in a report's or the CLI's counts line."""
    return {"gpu": "gpus", "whole_node": "nodes (sold whole)"}.get(rounding, "nodes")
