"""Which rejection reasons are rules and which are preferences, so a list of rejected
layouts can show them in two groups: "cannot run" (engine.legality's rules, a stack's
own limits, memory) and "runs, not preferred"
(:class:`engine.layout.lattice.point.LayoutPreferences` — TP inside a node, powers of
two, whole KV heads, a full pipeline, CP tokens per rank, the pipeline depth cap, FSDP
padding). A reader deciding what to buy needs to know that TP 16 across two nodes is a
choice, where TP 3 with 32 heads is impossible.

The preference messages are recognised by phrases of their wording in
``engine.layout.lattice.shapes`` and ``engine.layout.lattice.padding``; the test
re-judges layouts with no preferences (``LayoutPreferences.none()``) so a reworded
message cannot slip through."""

from __future__ import annotations

from collections.abc import Sequence

from engine.layout.lattice.point import Rejected

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
