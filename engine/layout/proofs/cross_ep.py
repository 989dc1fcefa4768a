"""A layout's fit peaks bounded from below by the same layout at a wider EP.

A MoE search meets every EP of a TP × PP × CP shape one after the other, each at the
same top DP, and under FSDP2 the narrow EPs fail by far (``test_maverick_narrow_eps_
are_over_by_the_widest``): a layer's experts gathered, their reduce-scatter input and the
MoE backward's unsharded expert gradients, which the peak floor and the state bound do
not count (they depend on EP, not DP). What a rank holds at
a narrower EP is at least what it holds at a wider one, up to a small, known δ; so once
the wider layout is known over by more than δ (its state bound or its estimate), the
narrower one is over without an estimate.

The rule, for EP e dividing e' (both dividing the experts E), the same TP, PP, CP, expert
TP, split, DP and batch, under plain FSDP2 (``fully_shard``, no HSDP), full training, no
offload, and an optimizer step whose temporaries are absent or a sum over tensors (foreach
or fused AdamW, SGD with momentum or Lion; plain SGD): every row of a stage at e is at
least its row at e', except the EP all-to-all buffers and communicators that exist at e'
only. Row by row (k = e' / e; the expert DP group is TP·CP·DP ÷ (EP·expert TP), so it is
k times larger at e):

- placement (:func:`engine.ledger.placement.place_tensor`, ``experts_folded``): the dense
  tensors are the same; a rank holds E/e routed experts, k times those at e' — a stacked
  ``(E, …)`` tensor keeps E/e rows of its expert dim, a per-expert tensor stands for E/e
  copies;
- persistent states (weights, gradients, optimizer moments: one allocation per tensor
  under FSDP2, dim 0 in N equal chunks): a stacked tensor's ceil((E/e) ÷ k·n) = ceil((E/e')
  ÷ n) rows are the same; a per-expert tensor's k copies of ceil(d0 ÷ k·n) rows are at
  least one copy of ceil(d0 ÷ n) rows (k·ceil(x ÷ k) ≥ ceil(x)), and the allocation
  rounding keeps that (k·⌈a/g⌉ ≥ ⌈k·a/g⌉);
- gathered units, the all-gather buffer (``peaks/gathered.py`` ``_padded_flat``) and the
  reduce-scatter input (``peaks/reduce_scatter.py``): a unit padded to k·n chunks of E/e
  experts is ≥ the same unit padded to n chunks of E/e' (the smallest multiple of k·n
  rows covering d0 is a multiple of n covering it); the largest unit, the one before the
  last and whether the buffer splits follow, moment by moment; FSDP gathers at e when it
  does at e' (the expert group is larger);
- gradients made before the first layer and unsharded accumulation: sums over the held
  tensors, as the states; foreach temporaries likewise (the largest sum of two
  consecutive (group, dtype) buckets: each bucket's sum is at least e''s);
- activations (:mod:`engine.ledger.activations`): the only rows reading EP are the MoE
  backward's unsharded expert gradients (``working._expert_grads``: ceil(E/EP) experts,
  more at e) and the all-to-all send / receive buffers (``exchange.ep_dispatch_part``:
  one per stage, whose size does not read EP, absent at EP 1);
- runtime (``groups.stage_groups``): the EP communicator exists at e' > 1 and not at
  e = 1; the expert DP communicator at e' (expert DP > 1 and ≠ DP × CP) may be absent at e
  (its expert DP may equal DP × CP); every other group is the same;
- the checkpoint event reads the root unit, which holds no routed expert.

So at every moment the allocated sum at e is at least e''s less the all-to-all buffers
(e = 1 only); the fit peak (largest phase high, plus ``int(peak × factor)`` of reserve,
plus the runtime inside the capacity) at e is then at least e''s less δ = those buffers,
their reserve share (plus one byte for the rounding) and the NCCL buffers of the
communicators e' has more. The high estimate is the heaviest stage's, so at least every
stage's: the stage that decides e''s bounds e's.

By the low figure, for the validation-low search, row by row at the rows' low ends: all
the rows above are exact (low = high) but for the activation rows, whose low is the
activation band's low factor times the packed share of their bytes (``packing.band_of``:
``int(n × low × share)``, non-decreasing in n, so the working set's larger expert
gradients at e keep it at least e''s), the optimizer step's temporaries (the same sum at
both ends under AdamW, low 0 otherwise: at e as at e'), the all-to-all buffers (their
low receives the balanced share, reading no EP either), the NCCL buffers (each
communicator's low) and the reserve (``int(peak × low factor)``). So at every moment the
low sum at e is at least e''s less the buffers' low; a stage's low fit peak (the largest
low of any moment, plus the reserve's low on it, plus the runtime's low inside the
capacity: :func:`engine.ledger.phases.peak_phase_of`) at e is at least e''s less δ_low =
the buffers' low, its share at the low factor (plus one byte) and the low NCCL buffers of
the communicators e' has more; and the low fit peak is the largest of any stage's
(:func:`engine.estimate.fit_range`, the same stages at every EP: they read PP and the
split only), so any stage of e' bounds e's.

Over a regime (the smaller DPs at e, :mod:`engine.layout.proofs.regimes`) a rank's peak
by either figure falls by at most the FSDP padding slack
(:func:`engine.layout.proofs.evaluate.slack`): the search asks the rule for a layout
with smaller DPs below it only where the layout pads nothing (slack 0 by both figures,
so they are over too); a padded one is bounded or estimated as before, its own slack
proving its regime.

The argument above enumerates rows: a row added or changed that reads EP, or that a
wider EP can hold more of, must be checked against it.
``tests/engine/layout/test_cross_ep.py::test_narrower_ep_holds_at_least_the_wider_less_delta``
checks both figures' bounds against both estimates on random plans;
``test_search_exact.py::test_counts_equal_brute_force_under_the_cross_ep_rule`` checks
the search's answers (the validation-low count among them) against brute force.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from contextlib import suppress

from engine.layout.candidates import padding_context, share_in
from engine.layout.point import Layout
from engine.layout.proofs.bound import LAYOUT_ERRORS
from engine.layout.proofs.evaluate import Outcome
from engine.layout.proofs.stage_bounds import LowFloors, StateFloors
from engine.layout.shapes import with_layout
from engine.ledger.activations.exchange import ep_dispatch_part
from engine.ledger.activations.geometry import geometry
from engine.ledger.peaks.runtime import reserve_factors
from engine.ledger.states.offload import offloads_nothing
from engine.ledger.states.persistent import stage_placed
from engine.legality import rules
from engine.plan import Plan
from engine.stacks.defaults import resolved

Estimate = Callable[[Layout], Outcome]
"""The search's memoised estimate of a layout (:meth:`engine.layout.proofs.evaluate.Evaluator.
peek`: not counted among the layouts the search asked for)."""

SUMMED_STEPS = frozenset({"adamw", "sgd_momentum", "lion"})
"""Optimizers whose step temporaries (``peaks/optimizer_step.optimizer_temp_rows``) are,
under foreach, sums of sharded parameters' copies over a group's dtype buckets (fused:
none; plain SGD: none at all); Adafactor's factored temporaries, 8-bit Adam's quantized
states and a custom optimizer's are left out."""


def in_scope(plan: Plan) -> bool:
    """Whether the rule holds for the resolved ``plan`` (see the module's docstring):
    a MoE model under plain FSDP2 (not torchtitan's profile), full training, nothing
    offloaded, and an optimizer
    step whose temporaries are absent or a sum over tensors (the for-loop's are the
    largest tensor's, which can be larger at a wider EP)."""
    if plan.model.architecture.moe is None or plan.parallelism.strategy != "fsdp2":
        return False
    if plan.method.kind != "full" or not offloads_nothing(plan):
        return False
    if plan.runtime.activation_profile == "torchtitan":
        # torchtitan's head and embedding FSDP2 units (the chunked loss's last chunk, the
        # head's second gather) are sized by the dense shard group, which a wider EP
        # changes: δ does not bound them (a hypothesis counterexample: 8.5 MB at TP 4)
        return False
    opt = plan.method.optimizer
    return opt.name == "sgd" or (
        opt.name in SUMMED_STEPS and opt.implementation in ("foreach", "fused")
    )


class CrossEp:
    """The rule of the module's docstring for one plan: each layout's wider EP, and δ."""

    def __init__(
        self, plan: Plan, state: StateFloors | None = None, low: LowFloors | None = None
    ) -> None:
        self.plan = plan
        self.state = state  # the plan's state bound, asked of the wider layout first
        self.low = low  # the plan's low bound, asked of the wider layout by the low figure
        self.eps = rules.ep_values(plan.model.architecture)
        self.applies = False
        # (low, high) ends of the reserve's factor and of one communicator's NCCL buffers
        self.factors, self.per_communicator = (0.0, 0.0), (0, 0)
        if plan.model.architecture.moe is not None:
            with suppress(*LAYOUT_ERRORS):
                base = resolved(plan)
                # neither reads the layout: the reserve is the plan's, the NCCL buffers
                # the accelerator's (``stacks/stack_rules.py`` ``_nccl``)
                model = reserve_factors(base)  # the part of the reserve fit counts
                self.factors = (max(model.frag[0], 0.0), max(model.frag[1], 0.0))
                per = base.runtime.nccl_bytes_per_communicator
                self.per_communicator = (0, 0) if per is None else (per.low, per.high)
                self.applies = in_scope(base)
        self._wide: dict[tuple[int, int, int], int] = {}
        self._dispatch: dict[tuple[object, ...], tuple[int, int] | None] = {}
        self._padding = padding_context(plan) if self.applies else None

    def over(
        self, layout: Layout, regime: bool, limit: int, estimate: Estimate, figure: str = "high"
    ) -> bool:
        """Whether ``layout``'s fit peak by ``figure`` ("high" or "low") is over ``limit``
        because the same layout at its widest EP (:meth:`wide`) is over ``limit`` + δ of
        that figure — by a bound or by its ``estimate`` (made now and memoised: free
        when the search comes to that layout) — and, with ``regime``, so is every smaller
        DP of its regime: asked then only where the layout pads nothing (see the module's
        docstring). The bound is the state bound (:mod:`engine.layout.proofs.stage_bounds`) by
        the high figure, and by the low one the low bound (:mod:`engine.layout.
        low_bound`), which dominates the state bound and which the low search works out
        for the wider layout when it probes it (memoised: one bound for every narrower
        EP). The search asks after the peak floor, which proves every batch of a shape
        over where it is, and before the layout's own low bound or state bound, which
        the wider layout's makes unneeded at every narrower EP."""
        wide = self.wide(layout)
        if wide is None or (regime and self.pads(layout)):
            return False
        delta = self.delta(layout, wide, figure)
        if delta is None:
            return False
        limit += delta
        if figure == "high":
            if self.state is not None and self.state.over(wide, "high", limit):
                return True
        elif self.low is not None and self.low.exceeds(wide, limit):
            return True
        o = estimate(wide)
        return o.ok and (o.high if figure == "high" else o.low) > limit

    def wide(self, layout: Layout) -> Layout | None:
        """``layout`` at the widest EP that its EP divides and that folds over its
        TP × CP × DP (:func:`engine.legality.rules.fold_problems`); None when the rule
        does not hold or no EP is wider."""
        if not self.applies:
            return None
        ranks = layout.tp * layout.cp * layout.dp
        key = (layout.ep, layout.etp, ranks)
        e = self._wide.get(key)
        if e is None:
            arch = self.plan.model.architecture
            e = layout.ep
            for cand in self.eps:
                wider = cand > e and cand % layout.ep == 0
                if wider and not rules.fold_problems(cand, layout.etp, ranks, arch):
                    e = cand
            self._wide[key] = e
        if e == layout.ep:
            return None
        lay = layout
        mb, ga = lay.micro_batch, lay.grad_accum
        return Layout(lay.tp, lay.pp, lay.cp, e, lay.dp, mb, ga, lay.etp, lay.pp_split)

    def pads(self, layout: Layout) -> bool:
        """Whether some FSDP unit of ``layout`` is padded (its regime's slack is not 0)."""
        return share_in(self._padding, layout)[0] > 0

    def delta(self, layout: Layout, wide: Layout, figure: str = "high") -> int | None:
        """δ of the module's docstring by ``figure`` ("high" or "low"): how much less than
        ``wide``'s fit peak by that figure ``layout``'s (the same at a narrower EP) can
        be, from that end of each part's range; None when ``wide`` cannot be laid out."""
        end = 0 if figure == "low" else 1
        dispatch = 0
        if layout.ep == 1:
            got = self._dispatch_at(wide)
            if got is None:
                return None
            dispatch = got[end]
        # the communicators the wider EP has more (``groups.stage_groups``): EP's, and
        # the expert DP group's where it is one at the wider EP only
        extra = int(layout.ep == 1)
        dense = wide.dp * wide.cp
        edp = wide.tp * dense // (wide.ep * wide.etp)
        narrow = edp * (wide.ep // layout.ep)
        if 1 < edp != dense and not 1 < narrow != dense:
            extra += 1
        reserve = math.ceil(dispatch * self.factors[end]) + 2
        return dispatch + reserve + extra * self.per_communicator[end]

    def _dispatch_at(self, wide: Layout) -> tuple[int, int] | None:
        """The EP all-to-all buffers of one stage at ``wide`` (every stage that places
        experts has the same, :func:`_dispatch`): they read the micro-batch's
        tokens on a rank and the expert TP, not EP (above one) or DP, so they are worked
        out once per TP, CP, PP, split, micro-batch and expert TP. None when ``wide``
        cannot be laid out."""
        key = (wide.tp, wide.cp, wide.pp, wide.pp_split, wide.micro_batch, wide.etp)
        if key not in self._dispatch:
            self._dispatch[key] = None
            with suppress(*LAYOUT_ERRORS):
                # the peak floor's plan of the layout (DP 1, the widest EP) when there is
                # one: the search has laid it out already
                floors = None if self.state is None else self.state.floors
                laid = floors.laid(wide) if floors is not None else None
                if laid is None:
                    laid = resolved(with_layout(self.plan, wide))
                self._dispatch[key] = _dispatch(laid)
        return self._dispatch[key]


def _dispatch(laid: Plan) -> tuple[int, int]:
    """The (low, high) bytes of the resolved plan's stage EP all-to-all buffers: those of
    the first stage that places experts — every such stage's are one size (the tokens on
    a rank, top-k, hidden, the expert TP and the capacity factor:
    ``exchange.ep_dispatch_part`` reads nothing of the stage but whether it holds
    experts), so the stages after it are not placed."""
    g = geometry(laid)
    for stage in range(laid.parallelism.pp):
        part = ep_dispatch_part(laid, g, stage_placed(laid, stage))
        if part is not None:
            return part.span[0], part.span[1]
    return 0, 0
