"""The FSDP padding share (``engine/layout/candidates.py``) that the search's candidates and
slacks read, worked out as the module's docstring says — each tensor's local dim-0 rows
padded to its shard group, the largest share of any unit — without its caches, merged
rows or shortcuts (the experts' group left out where no tensor is routed, a non-hybrid
strategy's group taken as its replicas): the same shares on random small plans
(``layout_plans.search_plans``: HSDP, MoE folding) at every legal layout. And a stacked
experts tensor's local rows are what the ledger places (``test_stacked_experts_pad_
by_their_local_experts``): with fewer local experts than the experts' shard group has
ranks it is mostly padding, which the search's slack must allow for."""

from __future__ import annotations

from hypothesis import assume, given
from hypothesis import strategies as st
from layout_plans import SEARCH_SETTINGS, TINY_MOE, legal_layouts, search_plans

from engine.errors import PlanError
from engine.layout.candidates import padding_context, share_in
from engine.layout.point import Layout
from engine.ledger.groups import ranks_per_node
from engine.ledger.placement import layer_classes
from engine.ledger.sharding import shard_group_size
from engine.models.roles import is_expert_parallel, tp_split_dim
from engine.plan import Plan, default_plan, with_values
from engine.stacks.defaults import resolved
from engine.stacks.families import rule_of


def _reference(plan: Plan, lay: Layout) -> tuple[int, int]:
    par = plan.parallelism
    rule = rule_of(par.strategy)
    if not (rule.params and rule.fsdp):
        return 0, 1
    rpn = ranks_per_node(plan)
    laid = par.model_copy(update={"tp": lay.tp, "cp": lay.cp, "dp": lay.dp})
    dense = shard_group_size(laid, lay.dp * lay.cp, rpn)
    expert = shard_group_size(laid, max(1, lay.tp * lay.cp * lay.dp // (lay.ep * lay.etp)), rpn)
    root, classes = layer_classes(resolved(plan).model.architecture)
    best = (0, 1)
    for tensors in (root, *(c.tensors for c in classes)):
        pad = total = 0
        for t in tensors:
            if not (t.shape and t.shape[0]):
                continue
            routed = is_expert_parallel(t)
            tp, group = (lay.etp, expert) if routed else (lay.tp, dense)
            d0, rest = t.shape[0], t.numel // t.shape[0]
            local = -(-d0 // tp) if tp_split_dim(t) == 0 else d0
            if routed and t.stacked and lay.ep > 1:
                # EP keeps ceil(E / ep) of a stacked tensor's experts (placement.place_tensor)
                local = -(-local // lay.ep)
            width = -(-rest // tp) if tp_split_dim(t) == 1 else rest
            pad += (-local % group) * width
            total += local * width
        if pad * best[1] > best[0] * (pad + total):
            best = (pad, pad + total)
    return best


@SEARCH_SETTINGS
@given(search_plans(), st.integers(1, 16))
def test_padding_share_is_the_reference(case: tuple[Plan, int], world: int) -> None:
    plan, _ = case
    for lay in legal_layouts(plan, world).legal:
        assert share_in(padding_context(plan), lay) == _reference(plan, lay), lay


@SEARCH_SETTINGS
@given(
    search_plans(),
    st.sampled_from(["fsdp2", "fsdp2_hsdp", "fsdp1_full_shard", "zero3"]),
    st.lists(
        st.tuples(
            st.sampled_from([1, 2, 3, 4, 8]),
            st.sampled_from([1, 2, 4]),
            st.integers(1, 96),
            st.sampled_from([1, 2, 4, 8]),
            st.sampled_from([1, 2]),
        ),
        min_size=1,
        max_size=40,
    ),
)
def test_padding_share_is_the_reference_where_it_pads(
    case: tuple[Plan, int], strategy: str, dims: list[tuple[int, int, int, int, int]]
) -> None:
    """Strategies that gather parameters at any TP, CP, DP (up to 96: more ranks than a
    small tensor's rows, and DPs that divide no row count), EP and expert TP, legal or
    not: the share is arithmetic on the tensors' rows either way."""
    plan, _ = case
    try:
        plan = with_values(plan, {"parallelism.strategy": strategy})
        resolved(plan)
    except PlanError:
        assume(False)
    for tp, cp, dp, ep, etp in dims:
        lay = Layout(tp=tp, pp=1, cp=cp, ep=ep, dp=dp, etp=etp)
        assert share_in(padding_context(plan), lay) == _reference(plan, lay), lay


def test_stacked_experts_pad_by_their_local_experts() -> None:
    """torchtitan-style stacked experts (one tensor of all of a layer's experts, FSDP2
    sharding its expert dimension): 4 experts on EP 4 leave each rank one, and its
    expert DP group of 4 (TP 1, CP 4, DP 4) pads that one row to 4 — three quarters of
    the gathered tensor is padding, as the ledger's gathered rows hold it. The share
    counted the unsplit 4 experts (no padding) before, so the search's slack missed
    12.5 MB that the all-gather buffer loses from DP 4 to DP 3."""
    plan = with_values(
        default_plan(),
        {"model.architecture": TINY_MOE, "parallelism.strategy": "fsdp2", "parallelism.dp": 1},
    )
    lay = Layout(tp=1, pp=1, cp=4, ep=4, dp=4)
    experts = [
        t
        for c in layer_classes(resolved(plan).model.architecture)[1]
        for t in c.tensors
        if is_expert_parallel(t)
    ]
    assert experts and all(t.stacked for t in experts)
    pad, padded = share_in(padding_context(plan), lay)
    assert pad * 4 >= padded * 3 * 0.9  # the expert unit: ~3/4 padding
    assert (pad, padded) == _reference(plan, lay)
