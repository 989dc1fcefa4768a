"""The three GPU counts: a case derived by hand with a formula estimator, and the real
default plan."""

from __future__ import annotations

from layout_fakes import fake_estimator, shards
from layout_plans import PESSIMISTIC

from engine.estimate import estimate
from engine.layout.counts import gpu_counts
from engine.layout.proofs.bound import peak_floors
from engine.layout.proofs.evaluate import Evaluator
from engine.layout.shapes import Layout, LayoutPreferences, enumerate_layouts, with_layout
from engine.plan import Plan, default_plan, with_values
from engine.presets import plan_for_model_preset


def _small_capacity() -> Plan:
    return with_values(
        default_plan(),
        {
            "hardware.usable_hbm_bytes": 100,
            "policy.headroom_percent": 0.0,
            "hardware.gpus_per_node": 8,
        },
    )


def test_three_counts_by_hand() -> None:
    """Peak high = ⌈1000 / N⌉ and low = ⌈700 / N⌉ bytes for N = TP·PP·CP·DP ranks;
    the limit is 100 B (capacity 100, no headroom), 8 GPUs per node, node rounding.

    High fits ⇔ 1000/N ≤ 100 ⇔ N ≥ 10: the arithmetic minimum is 10 ranks (TP1 DP10).
    The cheapest legal layout needs 10 ranks → 2 nodes → procure 16 GPUs; the search's
    first in preference order is TP1 DP10, 6 of the 16 GPUs idle, so the layout behind
    the count is one of all 16 that fits (engine/layout/beside.py fill_bought): those
    keeping the plan's global batch (DP 8 × 1 × 1 = 8) first, so TP2 DP8 (1000/16 = 63 B).
    Low fits ⇔ 700/N ≤ 100 ⇔ N ≥ 7 → 1 node: the validation range is 8–16 GPUs and it
    straddles (measure on 8 before buying 16).
    """
    est = fake_estimator(high=lambda p: -(-1000 // shards(p)), low=lambda p: -(-700 // shards(p)))
    c = gpu_counts(_small_capacity(), max_gpus=64, estimator=est)
    assert c.arithmetic_min.gpus == 10
    assert c.arithmetic_min.layout is not None and c.arithmetic_min.layout.dp == 10
    assert c.first_layout.gpus == 16 and c.nodes == 2
    lay = c.first_layout.layout
    assert lay is not None and (lay.tp, lay.pp, lay.cp, lay.ep, lay.dp) == (2, 1, 1, 1, 8)
    assert c.first_layout.outcome is not None and c.first_layout.outcome.high == 63
    assert c.validation_low.gpus == 8 and c.validation_high.gpus == 16
    assert c.straddles and "straddles" in c.validation_reason
    assert "procure 16 GPUs = 2 nodes × 8 (rounded to whole nodes)" in c.first_layout.reason
    # alternatives: layouts of 16 GPUs that fit, most headroom first
    heads = [o.headroom for o in c.alternatives]
    assert heads == sorted(heads, reverse=True) and all(o.fits_high for o in c.alternatives)
    assert all(o.layout.world_size == 16 for o in c.alternatives)


def test_gpu_rounding_and_topology_gap() -> None:
    """Same formula with rounding to GPUs: procurement = 10 GPUs. With TP costing
    nothing (peak 1000/(PP·CP·DP) only) the arithmetic minimum may use any divisor TP
    across nodes, but TP never helps so it is still 10."""
    plan = with_values(_small_capacity(), {"policy.rounding": "gpu"})
    est = fake_estimator(high=lambda p: -(-1000 // shards(p)))
    c = gpu_counts(plan, max_gpus=64, estimator=est)
    assert c.first_layout.gpus == 10 and c.arithmetic_min.gpus == 10
    assert not c.straddles and c.validation_low.gpus == 10


def test_nothing_fits_says_why() -> None:
    """High = 1000/N needs 10 ranks; searching only up to 8 finds none, and the reason
    names the closest layout (8 ranks, 125 B against 100 B)."""
    est = fake_estimator(high=lambda p: -(-1000 // shards(p)))
    c = gpu_counts(_small_capacity(), max_gpus=8, estimator=est)
    assert c.first_layout.gpus is None and c.arithmetic_min.gpus is None
    assert "no layout up to 8 GPUs fits" in c.first_layout.reason
    assert c.first_layout.outcome is not None and c.first_layout.outcome.high == 125


def test_default_plan_counts() -> None:
    """Llama-3.1-8B, FSDP2, AdamW, s = 4096: model states alone are 8,030,261,248 × 16 B
    = 128.5 GB, so one rank cannot fit the 76.44 GB limit (84,932,558,848 × 0.9); with
    activations, loss and runtime on top, the arithmetic minimum N is the smallest world
    where some layout's high estimate fits: its own layout fits, and no legal layout of
    N − 1 ranks does (every one estimated, topology preferences relaxed as the count
    relaxes them). It is at least 2 (states ÷ 2 = 64.2 GB) and the procurement count
    rounds the practical minimum up to a shape the hardware is sold in: 1, 2 or 4 GPUs
    below a node, whole nodes of 8 above (engine/layout/point.py)."""
    c = gpu_counts(default_plan(), max_gpus=4096)
    n = c.arithmetic_min.gpus
    assert n is not None and n >= 2
    arith = c.arithmetic_min.outcome
    assert arith is not None and arith.fits_high

    def fits(layout: Layout) -> bool:
        e = estimate(with_layout(default_plan(), layout))
        return e.heaviest.fit_peak.high <= e.limit_bytes

    smaller = enumerate_layouts(default_plan(), n - 1, LayoutPreferences().relaxed()).legal
    assert not any(fits(lay) for lay in smaller)
    assert c.first_layout.gpus is not None
    assert c.first_layout.gpus in (1, 2, 4) or c.first_layout.gpus % 8 == 0
    assert c.validation_low.gpus is not None and c.validation_high.gpus is not None
    assert c.validation_low.gpus <= c.validation_high.gpus
    o = c.first_layout.outcome
    assert o is not None and o.high <= c.limit_bytes

    bought = c.first_layout.gpus
    assert c.alternatives and all(o.layout.world_size == bought for o in c.alternatives)
    # a dense model's lattice has no expert-parallel layouts to reject
    assert not any("mixture-of-experts" in r for x in c.rejected for r in x.reasons)


def test_the_plans_own_layout_wins_when_it_fits() -> None:
    """The default plan at TP 4 DP 1 fits (TP shards every state 4 ways); TP2 DP2 fits too,
    comes first in preference order (less model parallelism) and costs the same partial
    node of 4 GPUs (engine/layout/point.py), so the procurement count's layout is the
    plan's own TP4, and it is the chosen layout — screen, counts and report agree. (At
    DP 8 it is not a tie: 4 GPUs of TP2 DP2 cost less than 8.)"""
    own = {"parallelism.tp": 4, "parallelism.dp": 1}
    c = gpu_counts(with_values(default_plan(), own), max_gpus=64)
    assert c.plan_layout is not None and c.plan_layout.fits_high
    assert c.first_layout.layout == c.plan_layout.layout and c.first_layout.gpus == 4
    assert c.chosen == c.plan_layout
    assert c.first_layout.reason.startswith("the plan's own layout TP4 PP1 CP1 EP1 DP1")
    assert (
        "a partial node (4 of 8 per node; below one node a purchase rounds up to 1, 2, 4 GPUs)"
        in c.first_layout.reason
    )


def test_a_plan_that_does_not_fit_names_the_layout_to_use() -> None:
    """DP 2 of the default plan does not fit (states ÷ 2 alone are 64 GB); the counts
    procure another layout, and the reason says the plan's own one does not fit."""
    plan = with_values(default_plan(), {"parallelism.dp": 2})
    c = gpu_counts(plan, max_gpus=64)
    assert c.plan_layout is not None and not c.plan_layout.fits_high
    assert c.chosen == c.first_layout.outcome
    assert "the plan's own layout TP1 PP1 CP1 EP1 DP2 (mb 1 × ga 1) does not fit" in (
        c.first_layout.reason
    )


def test_the_search_stops_at_its_time_budget() -> None:
    """A clock that advances one second per reading and a 3-second budget: the search
    stops after a few estimates and says how far it got (issue 21's bounded search)."""
    ticks = iter(range(10_000))
    c = gpu_counts(
        with_values(default_plan(), {"batch.seq_len": 8192}),
        budget_s=3.0,
        clock=lambda: float(next(ticks)),
    )
    assert c.stopped
    assert any("stopped at the budget (3 s)" in n for n in c.notes)
    assert c.notes[0].startswith("searched ")


def test_none_fits_names_the_closest_layout_the_search_always_named() -> None:
    """Llama-3.1-70B under plain DDP on H100 80 GB cannot fit up to 1,024 GPUs (every
    rank holds all 16 B/parameter of its stage). The reason names the closest layout a
    stack can run, TP within the node: TP8 PP16 at 177.21 GB (177.16 before the two 32 MiB
    cuBLAS workspaces became allocated bytes; TP64 PP16 at 133.78 GB when
    TP could cross nodes; recorded before the peak floor, which skips that layout — its
    floor is over the limit — in the search; the closest's own walk over every shape's
    largest DP per regime, ``engine/layout/beside.py``, estimates it)."""
    plan = with_values(
        plan_for_model_preset("llama-3.1-70b"), {"parallelism.strategy": "ddp", **PESSIMISTIC}
    )
    c = gpu_counts(plan, max_gpus=1024, budget_s=None)
    assert c.first_layout.gpus is None and c.arithmetic_min.gpus is None
    assert "within a node), TP8 PP16 CP1 EP1 DP1 (mb 1 × ga 16), needs 177.21 GB" in (
        c.first_layout.reason
    )


def test_a_second_search_reuses_the_floors_and_answers_the_same() -> None:
    """The floors and the bounds on them are kept per plan across searches
    (``bound.peak_floors``): a second search of the same plan starts from them and gives
    the same counts, with the same estimates made."""
    plan = plan_for_model_preset("mixtral-8x7b")
    first = gpu_counts(plan, max_gpus=256, budget_s=None)
    assert Evaluator(plan).floors is peak_floors(plan)
    again = gpu_counts(plan, max_gpus=256, budget_s=None)
    assert again == first
