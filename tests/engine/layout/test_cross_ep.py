"""The cross-EP rule (``engine/layout/proofs/cross_ep.py``): a layout's high and low fit peaks
are at least the same layout's at a wider EP less δ of that figure.

The search skips estimating a layout (and, where it pads nothing, every smaller DP of its
regime) when the layout at its widest EP is over the limit by more than δ, by the high
figure in the high searches and by the low one in the validation-low search. Sound only
if, for every pair of EPs e | e' of one TP × PP × CP × expert TP × split × DP × batch,
each figure of the estimate at e is at least that figure at e' less
:meth:`CrossEp.delta` of it — at every recompute policy, schedule, optimizer the rule
covers, expert storage, activation profile and capacity policy. Checked on random small
MoE plans (``layout_plans.search_plans`` with ``cross_ep``: 4 or 8 experts, so EP 1, 2,
4, 8 meet) and on real models, and the rule as the search asks it (a regime's smaller
DPs with it) against brute force; the search's answers with the rule are checked against
brute force in ``test_search_exact.py``.
"""

from __future__ import annotations

from dataclasses import replace

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from layout_plans import PESSIMISTIC, SEARCH_SETTINGS, legal_layouts, search_plans

from engine.errors import PlanError
from engine.estimate import estimate
from engine.layout.point import Layout
from engine.layout.proofs.bound import PeakFloors
from engine.layout.proofs.cross_ep import CrossEp, in_scope
from engine.layout.proofs.evaluate import Evaluator
from engine.layout.proofs.regimes import SearchMemo
from engine.layout.proofs.stage_bounds import LowFloors, StateFloors
from engine.layout.shapes import LayoutPreferences, legal_shapes, with_layout
from engine.plan import Plan, with_values
from engine.presets import plan_for_model_preset
from engine.stacks.defaults import resolved

FIGURES = ("high", "low")


def _peaks(plan: Plan, lay: Layout) -> dict[str, tuple[int, int]] | None:
    """(full, decisive-only) fit peaks of ``lay`` by figure; None when it cannot run."""
    laid = with_layout(plan, lay)
    try:
        full, decisive = estimate(laid).fit_peak, estimate(laid, decisive_only=True).fit_peak
    except PlanError:
        return None
    return {"high": (full.high, decisive.high), "low": (full.low, decisive.low)}


def _check_pairs(plan: Plan, world: int) -> int:
    """Assert the rule on every pair of legal layouts of ``world`` GPUs that differ in
    EP only, the narrower's EP dividing the wider's; how many pairs were compared."""
    cross = CrossEp(plan)
    assert cross.applies == in_scope(resolved(plan))
    by_rest: dict[tuple[object, ...], list[Layout]] = {}
    for lay in legal_layouts(plan, world).legal:
        rest = (lay.tp, lay.pp, lay.cp, lay.dp, lay.micro_batch, lay.grad_accum, lay.etp)
        by_rest.setdefault((*rest, lay.pp_split), []).append(lay)
    pairs = 0
    for lays in by_rest.values():
        peaks = {lay.ep: _peaks(plan, lay) for lay in lays}
        for narrow in sorted(lays, key=lambda lay: -lay.ep):  # δ's caches in any order
            for wide in lays:
                if wide.ep <= narrow.ep or wide.ep % narrow.ep:
                    continue
                got, ref = peaks[narrow.ep], peaks[wide.ep]
                if got is None or ref is None:
                    continue
                for figure in FIGURES:
                    delta = cross.delta(narrow, wide, figure)
                    assert delta is not None
                    assert delta == CrossEp(plan).delta(narrow, wide, figure)
                    g, r = got[figure], ref[figure]
                    assert g[0] >= r[0] - delta, (figure, narrow, wide, g, r, delta)
                    assert g[1] >= r[1] - delta, (figure, narrow, wide, g, r, delta)
                pairs += 1
        for lay in lays:  # the rule takes the widest EP it divides that folds: at least
            # every legal one here (the folding rule is a hard rule of the lattice)
            wider = [x.ep for x in lays if x.ep > lay.ep and x.ep % lay.ep == 0]
            wide_lay = cross.wide(lay)
            if wide_lay is None:
                assert not wider, lay
            else:
                assert wide_lay.ep % lay.ep == 0 and wide_lay.ep >= max(wider, default=0)
                assert wide_lay == replace(lay, ep=wide_lay.ep), lay
    return pairs


@settings(
    max_examples=80,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(search_plans(cross_ep=True), st.sampled_from([4, 8, 12, 16]))
def test_narrower_ep_holds_at_least_the_wider_less_delta(
    case: tuple[Plan, int], world: int
) -> None:
    plan, _ = case
    assert CrossEp(plan).applies
    _check_pairs(plan, world)


def test_cross_ep_on_presets() -> None:
    """The same on real MoE models under their FSDP2 presets, every legal layout of 16
    GPUs (stacked and per-expert storage, shared experts, dense first layers)."""
    for name in ("mixtral-8x7b", "deepseek-v2-lite", "qwen3-30b-a3b", "granite-3.1-3b-a800m"):
        plan = with_values(plan_for_model_preset(name), {"hardware.usable_hbm_bytes": 8e11})
        assert CrossEp(plan).applies, name
        assert _check_pairs(plan, 16) > 0, name


def test_out_of_scope_plans_have_no_rule() -> None:
    """HSDP, LoRA, an offload, the for-loop step and dense models: no wider layout."""
    plan = plan_for_model_preset("mixtral-8x7b")
    lay = Layout(1, 1, 1, 1, 8)
    assert CrossEp(plan).wide(lay) == Layout(1, 1, 1, 8, 8)
    for changes in (
        {"parallelism.strategy": "fsdp2_hsdp"},
        {"method.kind": "lora"},
        {"offload.optimizer": "cpu"},
        {"method.optimizer.implementation": "for_loop"},
        {"method.optimizer.name": "adafactor"},
    ):
        assert CrossEp(with_values(plan, changes)).wide(lay) is None, changes
    assert CrossEp(plan_for_model_preset("llama-3.1-8b")).wide(lay) is None


def test_maverick_narrow_eps_are_over_by_the_widest() -> None:
    """Llama-4-Maverick (FSDP2, H100) at TP 1, CP 4, DP 32: EP 1 estimates at ~287 GB,
    EP 128 at ~91 GB against a 76.4 GB limit — EP 1 to 64 are over without their own
    estimates, the widest's standing for them (one estimate for the seven); not their
    regimes below them, since FSDP pads a unit there (an estimate's slack proves those)."""
    plan = with_values(plan_for_model_preset("llama-4-maverick"), PESSIMISTIC)
    ev = Evaluator(plan)
    cross = CrossEp(plan, StateFloors(PeakFloors(plan)))
    limit = plan.hbm_limit_bytes
    for ep in (1, 2, 4, 8, 16, 32, 64):
        assert cross.over(Layout(1, 1, 4, ep, 32), False, limit, ev.peek), ep
        assert cross.pads(Layout(1, 1, 4, ep, 32))
        assert not cross.over(Layout(1, 1, 4, ep, 32), True, limit, ev.peek), ep
    # read, not asked for: the search's estimates (what a no-fit reason names) hold none
    assert (ev.peeks, ev.calls, ev.outcomes) == (7, 0, [])
    assert ev.peek(Layout(1, 1, 4, 128, 32)).high > limit


def test_maverick_narrow_eps_are_over_by_the_widest_low_bound() -> None:
    """The validation-low search's version: Llama-4-Maverick at TP 1, CP 2, DP 64 holds at
    least 78 GB at EP 128 by the low bound (its low estimate ~81 GB) against a 76.4 GB
    limit, so EP 1 to 64 fail by the low figure on that one stage's bound: no estimate
    and none of their own low bounds (each nearly an estimate); not their regimes below
    them, since FSDP pads a unit there."""
    plan = with_values(plan_for_model_preset("llama-4-maverick"), PESSIMISTIC)
    ev = Evaluator(plan)
    floors = PeakFloors(plan)
    low = LowFloors(floors)
    cross = CrossEp(plan, StateFloors(floors), low)
    limit = plan.hbm_limit_bytes
    for ep in (1, 2, 4, 8, 16, 32, 64):
        assert cross.over(Layout(1, 1, 2, ep, 64), False, limit, ev.peek, "low"), ep
        # not their regimes below them: FSDP pads a unit there, as by the high figure
        assert cross.pads(Layout(1, 1, 2, ep, 64))
        assert not cross.over(Layout(1, 1, 2, ep, 64), True, limit, ev.peek, "low"), ep
    assert (ev.peeks, low.stages_worked) == (0, 1)
    assert low.exceeds(Layout(1, 1, 2, 128, 64), limit)
    assert ev.peek(Layout(1, 1, 2, 1, 64)).low > limit


def _rule_against_brute_force(plan: Plan, max_gpus: int) -> int:
    """The rule as the search asks it (``minimum._Shape.probe``, by either figure, with
    the smaller DPs of each regime below a layout) against brute force: wherever it
    proves a layout over, that layout fails by the figure — and with its regime, every
    smaller DP of the regime does. How many layouts it proved."""
    floors = PeakFloors(plan)
    cross = CrossEp(plan, StateFloors(floors), LowFloors(floors))
    memo = SearchMemo(plan, full=False, padding=1.0)
    ev = Evaluator(plan)
    limit = plan.hbm_limit_bytes
    proved = 0
    for shape in legal_shapes(plan, max_gpus, LayoutPreferences.hard_rules_only()):
        for group in memo.regimes(shape, max_gpus // shape.model_parallel, 1).values():
            for i, lay in enumerate(group):
                for figure in FIGURES:
                    if not cross.over(lay, i > 0, limit, ev.peek, figure):
                        continue
                    proved += 1
                    for smaller in group[: i + 1]:
                        o = ev(smaller)
                        assert not (o.fits_high if figure == "high" else o.fits_low), (
                            figure,
                            lay,
                            smaller,
                        )
    return proved


@settings(SEARCH_SETTINGS, max_examples=100)
@given(search_plans(cross_ep=True))
def test_rule_proves_only_failures(case: tuple[Plan, int]) -> None:
    plan, max_gpus = case
    _rule_against_brute_force(plan, max_gpus)
