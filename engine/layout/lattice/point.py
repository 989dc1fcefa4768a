"""One point of the layout lattice, the preferences that rank points as practical, and a
rejected point's reasons. Plain values: nothing here knows a plan.

A rejected point's reasons fall in two groups a view shows apart (:func:`grouped`):
"cannot run" (engine.legality's rules, a stack's own limits, memory) and "runs, not
preferred" (:class:`LayoutPreferences`): a reader deciding what to buy needs to know
that TP 16 across two nodes is a choice, where TP 3 with 32 heads is impossible. The
preference messages are recognised by phrases of their wording
(:data:`PREFERENCE_PHRASES`, from ``lattice.shapes`` and ``lattice.padding``); the test
re-judges layouts with no preferences (``LayoutPreferences.none()``) so a reworded
message cannot slip through."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace


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
        DP of every shape, thousands per search, and ``replace`` costs 5× more)."""
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
    def replicas(self) -> int:
        """Rank groups that each consume their own micro-batches: DP."""
        return self.dp

    @property
    def global_batch(self) -> int:
        return self.micro_batch * self.grad_accum * self.replicas

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
