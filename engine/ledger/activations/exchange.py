"""Buffers of the collectives inside a layer (``hbm.comm.*``): context parallelism's K/V
exchange and expert parallelism's token all-to-all.

Both live only while one layer runs, in its forward and again in its backward, so they
are peaks of the layer being computed, not saved activations:

- CP, ``p2p`` (ring attention, TransformerEngine ``context_parallel.py``
  ``AttnFuncWithCPAndKVP2P.forward``): the local K/V chunk is concatenated into
  ``p2p_comm_buffers[0]`` and each of the cp − 1 ring steps receives the next chunk into
  a new ``empty_like`` buffer held in the same list; two are in use at any time (the one
  computed on, the one arriving), all cp of them when nothing is freed before the
  function returns — the range's two ends. ``all_gather`` (PyTorch ``context_parallel``,
  ``_RotateMethod.ALL_GATHER``; TransformerEngine ``AttnFuncWithCPAndKVAllGather``):
  the whole sequence's K and V, cp chunks, on every rank.
- EP (Megatron ``moe/token_dispatcher.py`` ``MoEAlltoAllTokenDispatcher.token_dispatch``
  and ``token_combine``): each routed copy of a token (top-k per token) is sent as a
  hidden-state row and the rank receives the rows routed to its experts — the same
  number when the router balances, up to the capacity factor more on a busy rank — and,
  with expert TP, gathered over the expert-TP group.
"""

from __future__ import annotations

from operator import attrgetter

from engine.ledger.activations.geometry import Geometry
from engine.ledger.activations.varying import Fixed, Span, new_fixed
from engine.ledger.placement import LocalTensor
from engine.ledger.row import FORWARD_BACKWARD, IN_LAYERS, Moment, Row, moments_in, span_row
from engine.plan import Plan
from engine.stacks.families import family_of
from engine.units import fmt_count, round_up


def cp_method(plan: Plan) -> str:
    """``parallelism.cp_comm`` with ``auto`` resolved: p2p for Megatron, else all_gather."""
    par = plan.parallelism
    if par.cp_comm != "auto":
        return par.cp_comm
    return "p2p" if family_of(par.strategy) == "megatron" else "all_gather"


_LIVE = moments_in(FORWARD_BACKWARD, IN_LAYERS)
"""The moments of an exchange buffer (make_row's for its phases)."""


def cp_kv_part(plan: Plan, g: Geometry) -> Fixed | None:
    """K and V chunks a rank holds while one layer's attention runs under CP: its bytes
    here, its row (from them) when read."""
    cp = plan.parallelism.cp
    if cp == 1:
        return None
    width = g.kv_local * (g.head_dim + g.v_dim)  # K and V elements per token
    chunk = round_up(g.tokens * width * g.compute_bytes, g.granularity)
    method = cp_method(plan)
    if method == "p2p":
        low, high = 2 * chunk, cp * chunk
        how = f"ring p2p: 2 (in use, arriving) to {cp} (all kept) K/V chunks"
        source = "te-context-parallel"
    else:
        low = high = cp * chunk
        how = f"all-gather of the whole sequence: {cp} K/V chunks"
        source = "torch-context-parallel"
    dtype = plan.method.precision.compute_dtype

    def words(span: Span, moments: frozenset[Moment]) -> Row:
        return span_row(
            id="hbm.comm.cp_kv",
            label=f"Context parallel K/V exchange ({method})",
            state="activations",
            span=span,
            moments=moments,
            formula=lambda: (
                f"one chunk {g.tokens}·{g.kv_local}·({g.head_dim} + {g.v_dim})·"
                f"{g.compute_bytes} = {fmt_count(chunk)} B; {how} = {fmt_count(low)}–"
                f"{fmt_count(high)} B while one layer's attention runs"
            ),
            source=source,
            phases=FORWARD_BACKWARD,
            dtype=dtype,
        )

    return new_fixed(((low, high), words, True, _LIVE))


_EXPERT = attrgetter("expert")
"""Whether a placed tensor is an expert's (read in C over a stage's tensors)."""


def ep_dispatch_part(plan: Plan, g: Geometry, placed: tuple[LocalTensor, ...]) -> Fixed | None:
    """The token all-to-all's send and receive buffers of one MoE layer (EP > 1): its
    bytes here, its row (from them) when read."""
    par, moe = plan.parallelism, plan.model.architecture.moe
    if moe is None or par.ep == 1 or not any(map(_EXPERT, placed)):
        return None
    rows = g.seq_tokens * moe.top_k  # routed token copies this rank sends
    one = rows * g.hidden * g.compute_bytes
    send = round_up(one, g.granularity)
    etp = par.expert_tp
    recv_low = round_up(one * etp, g.granularity)
    recv_high = round_up(int(one * etp * max(1.0, moe.capacity_factor)), g.granularity)
    dtype, ep = plan.method.precision.compute_dtype, par.ep

    def words(span: Span, moments: frozenset[Moment]) -> Row:
        assert moe is not None
        return span_row(
            id="hbm.comm.ep_dispatch",
            label=f"Expert parallel all-to-all buffers (EP {ep})",
            state="activations",
            span=span,
            moments=moments,
            formula=lambda: (
                f"send {g.seq_tokens} tokens × top-{moe.top_k} · {g.hidden} · "
                f"{g.compute_bytes} = {fmt_count(send)} B; receive the same"
                + (f" × expert TP {etp}" if etp > 1 else "")
                + (
                    f", up to × capacity factor {moe.capacity_factor:g}"
                    if moe.capacity_factor > 1
                    else " (balanced routing)"
                )
                + f" = {fmt_count(recv_low)}–{fmt_count(recv_high)} B, while one MoE layer runs"
            ),
            source="megatron-moe-alltoall",
            phases=FORWARD_BACKWARD,
            dtype=dtype,
        )

    return new_fixed(((send + recv_low, send + recv_high), words, True, _LIVE))


def exchange_parts(plan: Plan, g: Geometry, placed: tuple[LocalTensor, ...]) -> list[Fixed]:
    """The CP and EP exchange buffers of a stage that has decoder layers, as
    :class:`Fixed` parts (their rows built when read)."""
    parts = [cp_kv_part(plan, g), ep_dispatch_part(plan, g, placed)]
    return [p for p in parts if p is not None]
