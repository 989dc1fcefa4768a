"""The low search's bound (``engine/layout/proofs/stage_bounds.py``) never exceeds the low estimate.

The low search skips a layout when a stage's bound is over the limit, and a regime's
smaller DPs when it is over by more than the stage's padding slack; sound only if each
stage's bound is at most that stage's low fit peak (and so the layout's, the largest of
any stage) — at every DP, EP, stage, strategy, recompute policy, schedule, optimizer
and activation profile. Checked on random small plans (``layout_plans.search_plans``)
over every legal layout of a random world size, against the full estimate and the
search's decisive-stage one, and the regime rule against brute force.
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
from engine.estimate import StageEstimate, estimate
from engine.layout.point import Layout
from engine.layout.proofs.bound import PeakFloors
from engine.layout.proofs.evaluate import Evaluator, padded_slack, stage_padded
from engine.layout.proofs.regimes import SearchMemo
from engine.layout.proofs.stage_bounds import LowFloors, StateFloors
from engine.layout.shapes import (
    Lattice,
    LayoutPreferences,
    legal_shapes,
    with_layout,
)
from engine.plan import Plan, default_plan, with_values
from engine.presets import plan_for_model_preset


def _check_layouts(plan: Plan, lattice: Lattice) -> int:
    """Assert the bound is at most both estimates' low on every legal layout; how many."""
    return bound_below_estimates(plan, lattice, LowFloors(PeakFloors(plan)), lambda p: p.low)


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
    """The same on real models, every legal layout of 8 GPUs (PP up to 8, CP, EP)."""
    for plan in preset_plans():
        assert _check_layouts(plan, legal_layouts(plan, 8))


HEAD_REGATHER = "hbm.gathered.head_regather"
"""torchtitan's head unit gathered again inside the loss rows
(``engine/ledger/activations/loss_modes.py::titan_regather_at``): an activation row of a
padded state, so in the estimate's padded rows but not the bound's shared ones."""

HEAD_REDUCE_WORLD_ONE = "hbm.buckets.head_reduce_world_one"
"""torchtitan's head reduce copies at one rank (``loss_modes.titan_world_one_at``): the
other activation row of a padded state, DP 1 only and built only with placed tensors, so
never in the bound's canonical activation sums either (nor its shared rows): the bound
cannot lose it as DP falls, and its slack need not cover it (at a shard group of one it
holds no padding anyway)."""


def _activation_padded(st: StageEstimate) -> int:
    """The high bytes of the stage's padded-state rows that are activation rows."""
    return sum(r.high for r in st.rows if r.id in (HEAD_REGATHER, HEAD_REDUCE_WORLD_ONE))


def _stage_parts(plan: Plan, lattice: Lattice) -> int:
    """Each decisive stage's bound against the full estimate's stage, on every legal
    layout that estimates: at most its own low fit peak (what makes one stage over the
    limit a proof), and its padded bytes exactly the stage's padded rows'
    (``evaluate.stage_padded``) less its activation rows of a padded state, which the
    bound reads at the canonical layout and so cannot lose as DP falls (the regime
    rule's slack is of the rest: :func:`_stage_falls`). How many stages compared."""
    floors = LowFloors(PeakFloors(plan))
    compared = 0
    for lay in lattice.legal:
        try:
            full = estimate(with_layout(plan, lay))
        except PlanError:
            continue
        bounds = floors.stage_lows(lay)
        if bounds is None:
            continue
        for stage, got in bounds.items():
            st = full.stages[stage]
            assert got.bound <= st.fit_peak.low, (lay, stage)
            assert got.padded == stage_padded(st) - _activation_padded(st), (lay, stage)
            compared += 1
    return compared


@SEARCH_SETTINGS
@given(search_plans(), st.integers(1, 16))
def test_stage_bounds_below_each_stages_low(case: tuple[Plan, int], world: int) -> None:
    plan, _ = case
    _stage_parts(plan, legal_layouts(plan, world))


def test_stage_bounds_below_each_stages_low_on_presets() -> None:
    """The same on real models, every legal layout of 8 GPUs (PP up to 8)."""
    for plan in preset_plans():
        assert _stage_parts(plan, legal_layouts(plan, 8))


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
    assert floors.judge(lay, regime=True) == "dead"
    assert bound <= estimate(with_layout(plan, lay), decisive_only=True).fit_peak.low


def test_deepseek_v3_pp3_one_stage_over_settles_it() -> None:
    """DeepSeek-V3 (FSDP2, H100 80 GB) at TP 1, PP 3, CP 2, EP 8, DP 80: the first stage
    holds the most micro-batches in flight and its bound alone (~113 GB) is over the
    76.4 GB limit, so the verdict needs no other stage's shared rows (the last stage,
    with the fewest in flight, is within it by its bound, ~75.6 GB) — and the bound stays
    at most the estimate's low."""
    plan = plan_for_model_preset("deepseek-v3")
    floors = LowFloors(PeakFloors(plan))
    lay = Layout(1, 3, 2, 8, 80, 1, 3, 1, (20, 21, 20))
    assert floors.judge(lay, regime=True) == "dead"
    assert floors.stages_worked == 1
    bound = floors(lay)
    assert floors.stages_worked == 3
    assert bound > plan.hbm_limit_bytes
    assert bound <= estimate(with_layout(plan, lay), decisive_only=True).fit_peak.low


def _regime_rule_against_brute_force(plan: Plan, max_gpus: int) -> int:
    """The low search's regime-wide rule (``minimum._Shape._low_floor``) against
    brute force: wherever the bound proves a regime's DP dead (a stage over the limit by
    more than its padding slack), that layout and every smaller DP of its regime fail by
    the low estimate. How many layouts the rule proved."""
    floors = LowFloors(PeakFloors(plan))
    memo = SearchMemo(plan, full=False, padding=1.0)
    ev = Evaluator(plan)
    proved = 0
    for shape in legal_shapes(plan, max_gpus, LayoutPreferences.hard_rules_only()):
        for group in memo.regimes(shape, max_gpus // shape.model_parallel, 1).values():
            for i, lay in enumerate(group):
                if floors.judge(lay, regime=True) != "dead":
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
    """The same on real models up to 64 GPUs."""
    proved = 0
    for plan in preset_plans():
        proved += _regime_rule_against_brute_force(plan, 64)
    assert proved  # the rule is exercised


def _stage_falls(plan: Plan, max_gpus: int) -> int:
    """The step of the regime rule's proof (``low_bound.py``'s docstring) itself, stage by
    stage: within a regime a stage's bound at a smaller DP is at least its bound at a
    larger one less the slack of that one's padded rows (``evaluate.padded_slack`` of
    ``StageLow.padded``), so a stage over the limit by more than its slack is over it at
    every smaller DP. How many (stage, larger DP, smaller DP) triples compared."""
    floors = LowFloors(PeakFloors(plan))
    memo = SearchMemo(plan, full=False, padding=1.0)
    compared = 0
    for shape in legal_shapes(plan, max_gpus, LayoutPreferences.hard_rules_only()):
        for group in memo.regimes(shape, max_gpus // shape.model_parallel, 1).values():
            lows = [floors.stage_lows(lay) for lay in group]
            for i, (lay, at) in enumerate(zip(group, lows, strict=True)):
                for stage, low in (at or {}).items():
                    floor = low.bound - padded_slack(plan, lay, low.padded)
                    for smaller, below in zip(group[:i], lows[:i], strict=True):
                        if below is not None and stage in below:
                            assert below[stage].bound >= floor, (lay, smaller, stage)
                            compared += 1
    return compared


TITAN_FSDP1: dict[str, object] = {
    "model.architecture": {
        "family": "llama",
        "hidden": 1024,
        "layers": 3,
        "heads": 8,
        "kv_heads": 2,
        "intermediate": 2752,
        "vocab": 32000,
    },
    "batch.seq_len": 1024,
    "parallelism.strategy": "fsdp1_full_shard",
    "method.recompute.policy": "none",
    "runtime.activation_profile": "torchtitan",
    "runtime.loss_impl": "chunked",
    "hardware.gpus_per_node": 2,
    "hardware.usable_hbm_bytes": 2_500_000_000,
    "policy.headroom_percent": 0.0,
}
"""The hypothesis example that found the head unit outside the bound's padded rows
(``test_stage_bounds_below_each_stages_low``, hand-built): torchtitan's profile, FSDP1
full shard, chunked loss, a 3-layer 1024-wide Llama of vocab 32,000."""


def test_torchtitan_head_regather_is_outside_the_bounds_padded_rows() -> None:
    """At TP 1, PP 1, CP 1, DP 2 (bf16, 512 B granularity) the stage's padded rows
    (``evaluate.stage_padded``) are 439,392,256 B:

    - ``hbm.gathered.root`` (FSDP1 root kept gathered): embedding + lm_head + final norm,
      (2 × 32,000 × 1,024 + 1,024) el. × 2 B = 131,074,048;
    - ``hbm.gathered.layers``: two layer units, 2 × 11,077,632 el. × 2 B = 44,310,528
      (q, o 1,024²; k, v 1,024 × 256; gate, up, down 3 × 1,024 × 2,752; two norms);
    - ``hbm.gathered.last_layer_prefetch`` (FSDP1 BACKWARD_PRE: the root's pre-backward
      gathers the last layer before the loss, ``fsdp1_prefetch``): 11,077,632 × 2 B =
      22,155,264;
    - ``hbm.buckets.reduce_scatter``: 11,077,632 × (2 + 4) B + one more 2-byte input in
      flight 44,310,528 = 110,776,320;
    - ``hbm.buckets.root_grads``: the head unit, 32,769,024 el. × 2 B = 65,538,048;
    - ``hbm.gathered.head_regather`` (``loss_modes.titan_regather_at``, DP ≥ 2 only):
      round_up(32,000 × 1,024 × 2, 512) + round_up(1,024 × 2, 512) = 65,538,048, the
      chunked loss adding no scatter input and taking no loss tensor away.

    The first five are shared rows: the bound's padded bytes, 373,854,208. The last is
    an activation row, whole on every rank and absent from the bound's canonical (DP 1)
    activation sums, so the bound cannot lose it as DP falls: the regime rule's slack
    need not cover it (:func:`_stage_falls` on this plan; brute force agrees with the
    rule where it proves a regime dead), and the bound stays below the stage's low fit
    peak."""
    plan = with_values(default_plan(), TITAN_FSDP1)
    lay = Layout(1, 1, 1, 1, 2, 1, 1, 1, None)
    st = estimate(with_layout(plan, lay)).stages[0]
    rows = {r.id: r.high for r in st.rows}
    assert rows["hbm.gathered.root"] == (2 * 32_000 * 1_024 + 1_024) * 2 == 131_074_048
    assert rows["hbm.gathered.layers"] == 2 * 11_077_632 * 2 == 44_310_528
    assert rows["hbm.buckets.reduce_scatter"] == 11_077_632 * 6 + 44_310_528 == 110_776_320
    assert rows["hbm.buckets.root_grads"] == 32_769_024 * 2 == 65_538_048
    assert rows[HEAD_REGATHER] == 32_000 * 1_024 * 2 + 2_048 == 65_538_048
    assert rows["hbm.gathered.last_layer_prefetch"] == 11_077_632 * 2 == 22_155_264
    assert stage_padded(st) == 439_392_256
    floors = LowFloors(PeakFloors(plan))
    low = (floors.stage_lows(lay) or {})[0]
    assert low.padded == 373_854_208 == stage_padded(st) - rows[HEAD_REGATHER]
    assert low.bound <= st.fit_peak.low
    assert _stage_parts(plan, legal_layouts(plan, 2))
    assert _stage_falls(plan, 16)
    # at a 1.5 GB limit the rule proves layouts of this plan dead by that slack (7 up
    # to 16 GPUs), each failing by the low estimate, as every smaller DP of its regime
    tight = with_values(plan, {"hardware.usable_hbm_bytes": 1_500_000_000})
    assert _regime_rule_against_brute_force(tight, 16)


@SEARCH_SETTINGS
@given(search_plans())
def test_stage_bounds_fall_by_at_most_their_slack(case: tuple[Plan, int]) -> None:
    plan, max_gpus = case
    _stage_falls(plan, max_gpus)


def test_stage_bounds_fall_by_at_most_their_slack_on_presets() -> None:
    """The same on real models up to 32 GPUs."""
    assert sum(_stage_falls(plan, 32) for plan in preset_plans())


def _dominates_state_bound(plan: Plan, layouts: tuple[Layout, ...]) -> int:
    """Where the low bound is known, it is at least the state bound's low
    (:mod:`engine.layout.proofs.stage_bounds`): what lets the low search skip the state bound of
    a layout within the low one (``minimum._Shape.probe``). How many layouts compared."""
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
