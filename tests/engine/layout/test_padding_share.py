"""The FSDP padding share (``engine/layout/padding.py``) that the search's candidates and
slacks read, worked out as the module's docstring says — each tensor's local dim-0 rows
padded to its shard group, the largest share of any unit — without its caches, merged
rows or shortcuts (the experts' group left out where no tensor is routed, a non-hybrid
strategy's group taken as its replicas): the same shares on random small plans
(``layout_plans.search_plans``: HSDP, MoE folding) at every legal layout."""

from __future__ import annotations

from hypothesis import assume, given
from hypothesis import strategies as st
from layout_plans import SEARCH_SETTINGS, legal_layouts, search_plans

from engine.errors import PlanError
from engine.layout.padding import padding_share
from engine.layout.point import Layout
from engine.ledger.groups import ranks_per_node
from engine.ledger.placement import layer_classes
from engine.ledger.sharding import shard_group_size
from engine.models.roles import is_expert_parallel, tp_split_dim
from engine.plan import Plan, with_values
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
        assert padding_share(plan, lay) == _reference(plan, lay), lay


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
        assert padding_share(plan, lay) == _reference(plan, lay), lay
