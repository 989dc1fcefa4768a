"""The low search's bound (``engine/layout/low_bound.py``) never exceeds the low estimate.

The low search skips a layout when the bound is over the limit, and a regime's smaller
DPs when each one's bound is; sound only if the bound is at most the low fit peak of
that very layout — at every DP, EP, stage, strategy, recompute policy, schedule,
optimizer and activation profile, whichever phase peaks by the high figure. Checked on
random small plans (``layout_plans.search_plans``) over every legal layout of a random
world size, against the full estimate and the search's decisive-stage one.
"""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from layout_plans import (
    SEARCH_SETTINGS,
    bound_below_estimates,
    legal_layouts,
    preset_plans,
    search_plans,
)

from engine.errors import PlanError
from engine.estimate import estimate
from engine.layout.bound import PeakFloors
from engine.layout.evaluate import Evaluator
from engine.layout.lattice import (
    Lattice,
    LayoutPreferences,
    layout_of,
    legal_shapes,
    with_layout,
)
from engine.layout.low_bound import QUIET, LowFloors, fit_peak, narrowed
from engine.layout.point import Layout
from engine.layout.regimes import SearchMemo, padded_slack
from engine.layout.state_bound import StateFloors
from engine.ledger.row import MOMENTS
from engine.ledger.stage_rows import shared_rows
from engine.plan import Plan, with_values
from engine.presets import plan_for_model_preset
from engine.stacks.defaults import resolved


def _check_layouts(plan: Plan, lattice: Lattice) -> tuple[int, int]:
    """Assert the bound is at most both estimates' low on every legal layout; how many,
    and how many stages the bound found not the heaviest (:func:`narrowed`)."""
    floors = LowFloors(PeakFloors(plan))
    return bound_below_estimates(plan, lattice, floors, lambda peak: peak.low), floors.dropped


@settings(
    max_examples=80,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(search_plans(), st.integers(1, 16))
def test_low_bound_at_most_the_low_estimate(case: tuple[Plan, int], world: int) -> None:
    plan, _ = case
    _check_layouts(plan, legal_layouts(plan, world))


def test_low_bound_at_most_the_low_estimate_on_presets() -> None:
    """The same on real models, every legal layout of 8 GPUs (PP up to 8, CP, EP), where
    pipelined layouts' light stages are found not the heaviest and dropped (their
    bounds the smallest: the bound rises above them) — which the estimates bound."""
    dropped = 0
    for plan in preset_plans():
        compared, more = _check_layouts(plan, legal_layouts(plan, 8))
        assert compared
        dropped += more
    assert dropped  # the narrowing is exercised


def _stage_parts(plan: Plan, lattice: Lattice) -> int:
    """What :func:`narrowed` is given, against the full estimate stage by stage, on every
    legal layout that estimates: each decisive stage's bounds are at most its own fit
    peak's low and high, and :func:`fit_peak` is that fit peak exactly. How many stages
    were compared."""
    floors = LowFloors(PeakFloors(plan))
    compared = 0
    for lay in lattice.legal:
        try:
            full = estimate(with_layout(plan, lay))
        except PlanError:
            continue
        got = floors.stage_bounds(lay)
        if got is None:
            continue
        laid, bounds, _ = got
        for stage, (low, high) in bounds.items():
            peak = full.stages[stage].fit_peak
            assert low <= peak.low and high <= peak.high, (lay, stage)
            assert fit_peak(laid, stage) == (peak.low, peak.high), (lay, stage)
            compared += 1
    return compared


@SEARCH_SETTINGS
@given(search_plans(), st.integers(1, 16))
def test_stage_bounds_and_exact_fit_peaks(case: tuple[Plan, int], world: int) -> None:
    plan, _ = case
    _stage_parts(plan, legal_layouts(plan, world))


def test_stage_bounds_and_exact_fit_peaks_on_presets() -> None:
    """The same on real models, every legal layout of 8 GPUs (PP up to 8)."""
    for plan in preset_plans():
        assert _stage_parts(plan, legal_layouts(plan, 8))


@st.composite
def _stage_peaks(
    draw: st.DrawFn,
) -> tuple[list[tuple[int, int]], dict[int, tuple[int, int]], int]:
    """Stages' exact (low, high) fit peaks, lower bounds on each, and a cut-off: small
    numbers, so ties of highs (and lows) are common."""
    n = draw(st.integers(1, 5))
    small = st.integers(0, 6)
    exact = [(draw(small), draw(small)) for _ in range(n)]
    gap = st.integers(0, 3)
    bounds = {s: (low - draw(gap), high - draw(gap)) for s, (low, high) in enumerate(exact)}
    return exact, bounds, draw(st.integers(-1, 8))


@settings(max_examples=2000, deadline=None)
@given(_stage_peaks())
def test_narrowed_bounds_the_heaviest_stages_low(
    case: tuple[list[tuple[int, int]], dict[int, tuple[int, int]], int],
) -> None:
    """:func:`narrowed` against its definition: the heaviest stage is the first of the
    largest exact high, and the bound is at most its exact low — however ties of highs
    fall (a stage tied with the largest high is never dropped), whatever the cut-off —
    and at least the smallest stage bound (never weaker than that plain rule)."""
    exact, bounds, enough = case
    top = max(high for _, high in exact)
    heaviest = next(s for s, (_, high) in enumerate(exact) if high == top)
    got, dropped = narrowed(dict(bounds), enough, exact.__getitem__)
    assert min(low for low, _ in bounds.values()) <= got <= exact[heaviest][0]
    assert 0 <= dropped < len(exact)


def test_quiet_phases_are_counted_exactly() -> None:
    """What the bound's phase exclusion rests on: at the moments of steady, optimizer and
    checkpoint every stage's allocated sums are exactly its shared rows' plus the
    canonical activation rows' (the input batch and rotary buffers, live throughout; the
    rows the canonical layout lacks — autocast weight copies, the all-to-all buffers —
    are live in forward and backward only), on a pipelined MoE plan with EP, autocast
    and accumulation, a DDP plan and a ZeRO-3 one; at forward the shared rows alone fall
    short (the check can fail)."""
    plans = [
        with_values(
            plan_for_model_preset("mixtral-8x7b"),
            {"parallelism.pp": 4, "parallelism.ep": 2, "batch.grad_accum": 8},
        ),
        with_values(plan_for_model_preset("llama-3.1-8b"), {"parallelism.strategy": "ddp"}),
        with_values(plan_for_model_preset("llama-3.1-8b"), {"parallelism.strategy": "zero3"}),
    ]
    for plan in plans:
        laid = resolved(plan)
        got = PeakFloors(plan).canonical(layout_of(plan))
        assert got is not None
        canonical = {st.stage: st.activation_sums for st in got[1]}
        for stage in estimate(plan, decisive_only=True).stages:
            shared = shared_rows(laid, stage.stage).sums
            for i, (m, ph) in enumerate(MOMENTS):
                real = (stage.moments[m].low, stage.moments[m].high)
                act = canonical[stage.stage][i]
                bound = (shared[i][0] + act[0], shared[i][1] + act[1])
                if ph in QUIET:
                    assert real == bound, (plan.model.name, stage.stage, m)
                elif m == "forward":
                    assert real[0] > shared[i][0], (plan.model.name, stage.stage, m)


def test_deepseek_v3_tp4_without_cp_is_over_the_limit_by_the_low_bound() -> None:
    """DeepSeek-V3 (FSDP2, H100 80 GB, 4,096 tokens, no recompute) at TP 4, PP 1, CP 1
    saves ~124 GB of activations per rank: its low fit peak is over the 76.4 GB limit
    too, and the bound proves it without an estimate (and stays below the estimate)."""
    plan = with_values(plan_for_model_preset("deepseek-v3"), {"parallelism.strategy": "fsdp2"})
    floors = LowFloors(PeakFloors(plan))
    lay = next(
        x for x in legal_layouts(plan, 2048).legal if (x.tp, x.pp, x.cp, x.ep) == (4, 1, 1, 16)
    )
    bound = floors(lay)
    assert bound > plan.hbm_limit_bytes
    assert bound <= estimate(with_layout(plan, lay), decisive_only=True).fit_peak.low


def test_deepseek_v3_pp3_light_last_stage_is_dropped() -> None:
    """DeepSeek-V3 (FSDP2, H100 80 GB) at TP 1, PP 3, CP 2, EP 8, DP 80: the first stage
    holds the most micro-batches in flight, the last the fewest, and the smallest stage
    bound (the last's, ~75.6 GB) is within the 76.4 GB limit, so the low search used to
    estimate it — and it fails. The last stage's exact high is below the first's high
    bound: dropped, the bound is the others' (~113 GB), over the limit and still at most
    the estimate's low."""
    plan = plan_for_model_preset("deepseek-v3")
    floors = LowFloors(PeakFloors(plan))
    lay = Layout(1, 3, 2, 8, 80, 1, 3, 1, (20, 21, 20))
    bound = floors(lay)
    assert floors.dropped >= 1
    assert bound > plan.hbm_limit_bytes
    assert bound <= estimate(with_layout(plan, lay), decisive_only=True).fit_peak.low


def _padded_covered(plan: Plan, lattice: Lattice) -> int:
    """Assert the bound's padded bytes are at least the estimate's (``Outcome.padded``,
    the heaviest stage's), on every legal layout that estimates; how many."""
    ev = Evaluator(plan)
    floors = LowFloors(PeakFloors(plan))
    compared = 0
    for lay in lattice.legal:
        o = ev(lay)
        bound, padded = floors.with_padded(lay)
        if not o.ok or not bound:
            continue
        assert padded >= o.padded, lay
        compared += 1
    return compared


@SEARCH_SETTINGS
@given(search_plans(), st.integers(1, 16))
def test_padded_bound_covers_the_estimates_padded_bytes(case: tuple[Plan, int], world: int) -> None:
    plan, _ = case
    _padded_covered(plan, legal_layouts(plan, world))


def _regime_rule_against_brute_force(plan: Plan, max_gpus: int) -> int:
    """The low search's regime-wide rule (``search._Shape._low_floor``) against
    brute force: wherever the bound at a regime's DP is over the limit by more than its
    slack bound, that layout and every smaller DP of its regime fail by the low estimate.
    How many layouts the rule proved."""
    floors = LowFloors(PeakFloors(plan))
    memo = SearchMemo(plan, full=False, padding=1.0)
    limit = plan.hbm_limit_bytes
    ev = Evaluator(plan)
    proved = 0
    for shape in legal_shapes(plan, max_gpus, LayoutPreferences.hard_rules_only()):
        for group in memo.regimes(shape, max_gpus // shape.model_parallel, 1).values():
            for i, lay in enumerate(group):
                bound, padded = floors.with_padded(lay)
                if bound - limit <= padded_slack(plan, lay, padded):
                    continue
                proved += 1
                for smaller in group[: i + 1]:
                    assert not ev(smaller).fits_low, (lay, smaller)
    return proved


@SEARCH_SETTINGS
@given(search_plans())
def test_regime_wide_low_bound_proves_only_failures(case: tuple[Plan, int]) -> None:
    plan, max_gpus = case
    _regime_rule_against_brute_force(plan, max_gpus)


def test_regime_wide_low_bound_on_presets() -> None:
    """The same on real models up to 64 GPUs, and the padded bytes covered at 8."""
    proved = 0
    for plan in preset_plans():
        proved += _regime_rule_against_brute_force(plan, 64)
        assert _padded_covered(plan, legal_layouts(plan, 8))
    assert proved  # the rule is exercised (over a thousand layouts today)


def _dominates_state_bound(plan: Plan, layouts: tuple[Layout, ...]) -> int:
    """Where the low bound is known, it is at least the state bound's low
    (:mod:`engine.layout.state_bound`): what lets the low search skip the state bound of
    a layout within the low one (``search._Shape.probe``). How many layouts compared."""
    floors = PeakFloors(plan)
    low, states = LowFloors(floors), StateFloors(floors)
    compared = 0
    for lay in layouts:
        bound = low(lay)
        if bound:
            compared += 1
            assert bound >= states(lay)[0], lay
    return compared


@SEARCH_SETTINGS
@given(search_plans(), st.integers(1, 16))
def test_low_bound_dominates_the_state_bound(case: tuple[Plan, int], world: int) -> None:
    plan, _ = case
    _dominates_state_bound(plan, legal_layouts(plan, world).legal)


def test_low_bound_dominates_the_state_bound_on_presets() -> None:
    """The same on real models, every legal layout of 8 GPUs."""
    assert sum(_dominates_state_bound(p, legal_layouts(p, 8).legal) for p in preset_plans())
