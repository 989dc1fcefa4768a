"""FSDP2's reduce-scatter inputs in the reduce-scatter stream's pool before torch 2.5
(engine/allocator/fsdp2_pools.py ``reduce_scatter_inputs``, ``Fsdp2Pools.rs_layer`` /
``rs_root``), hand-derived.

Sources: torch ``distributed/_composable/fsdp/_fsdp_collectives.py``
``foreach_reduce_scatter`` as of March 2024 — ``torch.empty`` of the flat input in the
reduce dtype under ``torch.cuda.stream(reduce_scatter_stream)``, freed when the function
returns; pytorch#129721 (June 2024, torch 2.5) moved the copy-in, and so the input, to
the default stream. ``CUDACachingAllocator.cpp``: a block is reused only by its own
stream (``get_free_block`` searches the request's stream's pool, best fit), a request of
10 MiB or more gets a segment of its own rounded to 2 MiB, and a freed block recorded on
another stream (ProcessGroupNCCL's ``recordStream`` on a collective's input) returns to
its pool only once that stream's event completes (``insert_events`` / ``process_events``).
"""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from engine.allocator.fsdp2_pools import (
    RS_PENDING_RECORD_STREAM,
    RS_PENDING_STASHED,
    Fsdp2Pools,
    fsdp2_extra,
    fsdp2_formula,
    reduce_scatter_inputs,
)
from engine.allocator.rules import AllocatorConfig
from engine.allocator.simulator import Simulator
from engine.estimate import estimate
from engine.stacks.defaults import resolved
from tests.engine.allocator.published import TORCHTITAN_PR165, calibrated, plan_of

FRAG, SIDE = (0.05, 0.09), (1.55, 1.74)
LAYER = 202_383_360 * 4
"""Llama-2-7B's layer unit: 4 × 4,096² (wq, wk, wv, wo) + 3 × 4,096 × 11,008 (w1, w2,
w3) + 2 × 4,096 (norms) = 202,383,360 el., fp32 (``reduce_dtype=torch.float32``,
torchtitan 83c879f18 ``parallelize_llama``): 809,533,440 B."""
ROOT = (2 * 32_000 * 4_096 + 4_096) * 4
"""The 2024 root unit (the whole model: tok_embeddings, norm, output; torchtitan before
0.2.0): 262,148,096 el. × 4 B = 1,048,592,384 B."""


def test_the_version_decides_the_stream() -> None:
    """torch 2.4 (and older): the layer's block, and the root's beside it only where it
    is the larger (else the root's request is served from the layer's freed block, best
    fit); torch 2.5 on: nothing in that pool (a compute-stream transient)."""
    assert reduce_scatter_inputs((2, 4), LAYER, ROOT) == (LAYER, ROOT)
    assert reduce_scatter_inputs((2, 4), LAYER, LAYER // 2) == (LAYER, 0)
    assert reduce_scatter_inputs((2, 4), 0, ROOT) == (0, 0)
    assert reduce_scatter_inputs((2, 5), LAYER, ROOT) == (0, 0)
    assert reduce_scatter_inputs((2, 13), LAYER, ROOT) == (0, 0)


def test_the_simulator_keeps_a_layer_block_and_the_root_block() -> None:
    """One backward's reduce-scatter inputs on their own stream (stream 2), each freed
    before the next is requested (no event pending): 32 layer requests share one segment
    (809,533,440 B = 386 × 2 MiB + 32,768 B, rounded up to 387 × 2 MiB = 811,597,824 B),
    and the root's 1,048,592,384 B, which that block cannot serve, takes a segment of its
    own (500 × 2 MiB + 8,192 B → 501 × 2 MiB = 1,050,673,152 B); the next step reuses
    both. With the previous input's collective still pending (its block not yet
    back in the pool) each request makes one more layer segment: two in all."""
    sim = Simulator(AllocatorConfig())
    for _step in range(2):
        for i in range(32):
            sim.malloc(i, LAYER, stream=2)
            sim.free(i)
        sim.malloc(99, ROOT, stream=2)
        sim.free(99)
    assert sim.reserved == 811_597_824 + 1_050_673_152 and sim.segments_made == 2
    pending = Simulator(AllocatorConfig())
    for i in range(32):
        pending.malloc(i, LAYER, stream=2)
        if i:
            pending.free(i - 1)  # the previous block returns once its collective ran
    assert pending.reserved == 2 * 811_597_824


def test_the_pool_at_the_loss_and_elsewhere() -> None:
    """10 GB transient, 1 GB all-gather working set, no other pool, recordStream (one
    layer block pending at both ends: the host of a GPU-bound backward is a layer ahead,
    fsdp2_pools' module docstring): at the loss's backward 0.05 × 10 GB + 1.55 × 1 GB +
    two layer blocks and the root's (2 × 809,533,440 + 1,048,592,384 = 2,667,659,264 B) =
    4,717,659,264 B; high end 0.9 + 1.74 GB + the same blocks = 5,307,659,264 B.
    Elsewhere one layer's input may be live (the bucket row counts it): the low end keeps
    the pending block and the root's, 2,050,000,000 + 809,533,440 + 1,048,592,384 =
    3,908,125,824 B."""
    pools = Fsdp2Pools(ag=10**9, rs_layer=LAYER, rs_root=ROOT)
    t = (10**10, 10**10)
    assert fsdp2_extra(FRAG, SIDE, pools, t, (True, True)) == (4_717_659_264, 5_307_659_264)
    assert fsdp2_extra(FRAG, SIDE, pools, t, (False, False)) == (3_908_125_824, 5_307_659_264)
    assert fsdp2_extra(FRAG, SIDE, pools, t, None) == (3_908_125_824, 5_307_659_264)


def test_stashed_inputs_leave_no_layer_block_pending() -> None:
    """TORCH_NCCL_AVOID_RECORD_STREAMS=1 (ProcessGroupNCCL stashes the input and
    ``WorkNCCL::synchronizeStreams`` clears the stash in the synchronous collective's own
    ``wait()``, after the reduce-scatter stream waits on the NCCL end event): the block
    is back in that stream's pool before the next layer's request, as in the simulator
    replay above without a pending event — both ends lose the second layer block: at the
    loss 0.05 × 10 GB + 1.55 × 1 GB + 809,533,440 + 1,048,592,384 B = 3,908,125,824 B and
    0.09 × 10 GB + 1.74 × 1 GB + the same = 4,498,125,824 B (each 809,533,440 B under
    recordStream's); elsewhere the low end keeps the root's block only, 3,098,592,384 B.
    torchtitan 83c879f did not set the variable (recordStream, the default)."""
    assert (RS_PENDING_RECORD_STREAM, RS_PENDING_STASHED) == ((1, 1), (0, 0))
    pools = Fsdp2Pools(ag=10**9, rs_layer=LAYER, rs_root=ROOT)
    assert pools.rs_pending == RS_PENDING_RECORD_STREAM
    stashed = pools._replace(rs_pending=RS_PENDING_STASHED)
    t = (10**10, 10**10)
    assert fsdp2_extra(FRAG, SIDE, stashed, t, (True, True)) == (3_908_125_824, 4_498_125_824)
    assert fsdp2_extra(FRAG, SIDE, stashed, t, None) == (3_098_592_384, 4_498_125_824)
    assert "one layer's more" in fsdp2_formula(FRAG, SIDE, pools, t, (True, True))
    text = fsdp2_formula(FRAG, SIDE, stashed, t, (True, True))
    assert "1,858,125,824–1,858,125,824 B" in text and "one layer's more" not in text


@given(
    t=st.integers(0, 10**11),
    layer=st.integers(0, 10**10),
    root=st.integers(0, 10**10),
    rs=st.integers(0, 10**10),
)
def test_the_inputs_pool_only_adds(t: int, layer: int, root: int, rs: int) -> None:
    """The pool never lowers either end, keeps the band ordered, and adds at least the
    layer's and the root's blocks at the loss."""
    rs_layer, rs_root = reduce_scatter_inputs((2, 4), layer, root)
    for at in ((True, True), (False, False), None):
        base = fsdp2_extra(FRAG, SIDE, Fsdp2Pools(ag=10**9, rs=rs), (t, t), at)
        pools = Fsdp2Pools(ag=10**9, rs=rs, rs_layer=rs_layer, rs_root=rs_root)
        low, high = fsdp2_extra(FRAG, SIDE, pools, (t, t), at)
        assert base[0] <= low <= high and base[1] <= high
    low, _ = fsdp2_extra(FRAG, SIDE, pools, (t, t), (True, True))
    assert low >= base[0] + rs_layer + rs_root


def test_the_pr165_plan_reads_its_pools_from_the_rows() -> None:
    """torchtitan PR #165's run (published.TORCHTITAN_PR165: torch 2.4 nightly): the
    layer's fp32 input is the ``hbm.buckets.reduce_scatter`` row, the root's its gathered
    bf16 bytes (262,148,096 × 2) in fp32; the same plan under torch 2.13 has neither."""
    plan = resolved(plan_of("llama-2-7b", {**TORCHTITAN_PR165, "method.recompute.policy": "full"}))
    pools = estimate(plan).heaviest.totals.side.fsdp2  # type: ignore[attr-defined]
    assert (pools.rs_layer, pools.rs_root) == (LAYER, ROOT)
    assert pools.rs_pending == RS_PENDING_RECORD_STREAM  # 83c879f: no AVOID_RECORD_STREAMS
    now = {**TORCHTITAN_PR165, "runtime.framework_version": "torch 2.13"}
    later = estimate(resolved(plan_of("llama-2-7b", now))).heaviest.totals.side.fsdp2  # type: ignore[attr-defined]
    assert (later.rs_layer, later.rs_root) == (0, 0)
    row = next(r for r in estimate(plan).rows if r.id == "hbm.runtime.allocator_reserve")
    assert "809,533,440" in row.formula and "1,048,592,384" in row.formula


def test_lora_roots_have_no_reduce_scatter_input() -> None:
    """Under LoRA the root's embedding and output are frozen (no gradient, nothing to
    reduce-scatter): only the layer's adapters' input is in the pool."""
    sets = {
        "stack.name": "hf_trainer",
        "parallelism.strategy": "fsdp2",
        "parallelism.dp": 8,
        "method.kind": "lora",
        "runtime.framework_version": "torch 2.4",
    }
    pools = estimate(resolved(plan_of("llama-2-7b", sets))).heaviest.totals.side.fsdp2  # type: ignore[attr-defined]
    assert pools.rs_root == 0 and 0 < pools.rs_layer < LAYER


def test_calibrate_takes_the_inputs_pool_out_of_the_fragmentation() -> None:
    """``memplan calibrate`` on PR #165's SAC plan with its pair (52.13 % / 62.51 % of
    95 GiB): the pools at the loss are 1.645 × 929,062,912 (root + one layer all-gather
    output) + 3,369,207,808 (sharded fp32 gradients) + 809,533,440 + 1,048,592,384 B (the
    reduce-scatter inputs' blocks), over the transient allocated − the steady part."""
    plan = resolved(plan_of("llama-2-7b", TORCHTITAN_PR165))
    est = estimate(plan)
    steady = est.heaviest.totals.steady[1]
    alloc, res = int(0.5213 * 95 * 2**30), int(0.6251 * 95 * 2**30)
    band = calibrated(plan, est, alloc, res).changes["runtime.fragmentation"]
    pools = 1.645 * 929_062_912 + 3_369_207_808 + LAYER + ROOT
    f = (res - alloc - pools) / (alloc - steady)
    assert band["low"] <= f <= band["high"] and band["high"] - band["low"] <= 2e-4


def test_the_last_layers_backward_frees_the_pools_too() -> None:
    """``backward.layers`` (the last layer's backward) comes before any reduce-scatter:
    the freed sharded gradients (1.5 GB) and the inputs' blocks are as free there as at
    the loss, without the loss's terms (no hole, the loss blocks stay in the transient):
    0.05 × 10 GB + 1.55 × 1 GB + 1.5 GB + two layer blocks (one pending) and the root's,
    2,667,659,264 B = 6,217,659,264 B; high 0.9 + 1.74 + 1.5 GB + the same =
    6,807,659,264 B. Without that moment (a plain pair) the low end keeps neither the
    gradients nor the live layer's block: 2.05 GB + 809,533,440 + 1,048,592,384 B."""
    pools = Fsdp2Pools(
        ag=10**9, rs=1_500_000_000, hole=5 * 10**8, loss=4 * 10**9, rs_layer=LAYER, rs_root=ROOT
    )
    t = (10**10, 10**10)
    got = fsdp2_extra(FRAG, SIDE, pools, t, (False, False), (True, True))
    assert got == (6_217_659_264, 6_807_659_264)
    assert fsdp2_extra(FRAG, SIDE, pools, t, (False, False))[0] == 3_908_125_824


def test_the_pr165_sac_plan_peaks_before_any_reduce_scatter() -> None:
    """The SAC plan's backward peaks at the loss's backward, a moment before any
    reduce-scatter. torchtitan at 83c879f ran its own eager final RMSNorm
    (models/norms.py: ``self._norm(x.float()).type_as(x) * weight``), which keeps the
    fp32 upcast: 8 × 2048 tokens × 4096 × 4 B = 268,435,456 B more at the loss than
    torch's fused norm, 47,872,556,584 + 268,435,456 = 48,140,992,040 B, above the last
    layer's backward (48,023,545,916 B). Both moments come before any reduce-scatter, so
    the same pools are free at either: the reserve's low end is 0.05 × (48,140,992,040 −
    10,177,240,576 steady) + 1.55 × 929,062,912 + the freed 3,369,207,808 B + two layer
    blocks (one pending under recordStream), 2 × 809,533,440, + 1,048,592,384 B =
    9,375,102,158 B (rounded down)."""
    est = estimate(resolved(plan_of("llama-2-7b", TORCHTITAN_PR165)))
    t = est.heaviest.totals
    assert (t.lows[2], t.lows[3], t.steady[0]) == (
        47_872_556_584 + 268_435_456,
        48_023_545_916,
        10_177_240_576,
    )
    assert est.heaviest.reserved_peak.low - est.peak.low == 9_375_102_158


@given(
    t=st.integers(0, 10**11),
    rs=st.integers(0, 10**10),
    layer=st.integers(0, 10**10),
    hole=st.integers(0, 10**10),
)
def test_a_moment_before_any_reduce_scatter_never_lowers_the_reserve(
    t: int, rs: int, layer: int, hole: int
) -> None:
    """Marking an end as before any reduce-scatter only frees pools: each end is at
    least the plain moment's, and the loss's own terms (the hole) never appear there."""
    pools = Fsdp2Pools(ag=10**9, rs=rs, hole=hole, rs_layer=layer, rs_root=layer // 2)
    plain = fsdp2_extra(FRAG, SIDE, pools, (t, t), (False, False))
    early = fsdp2_extra(FRAG, SIDE, pools, (t, t), (False, False), (True, True))
    assert plain[0] <= early[0] <= early[1] and plain[1] <= early[1]
    no_hole = fsdp2_extra(FRAG, SIDE, pools._replace(hole=0), (t, t), (False, False), (True, True))
    assert early == no_hole


@given(
    t=st.integers(0, 10**11),
    layer=st.integers(1, 10**10),
    lo=st.integers(0, 3),
    more=st.integers(0, 3),
)
def test_each_pending_block_adds_one_layer_block_at_its_end(
    t: int, layer: int, lo: int, more: int
) -> None:
    """``rs_pending`` (low, high): each pending block adds exactly one layer block at its
    own end, at the loss and elsewhere, and the band stays ordered while low ≤ high."""
    pools = Fsdp2Pools(ag=10**9, rs_layer=layer, rs_root=2 * layer)
    for at in ((True, True), None):
        none = fsdp2_extra(FRAG, SIDE, pools._replace(rs_pending=(0, 0)), (t, t), at)
        got = fsdp2_extra(FRAG, SIDE, pools._replace(rs_pending=(lo, lo + more)), (t, t), at)
        assert got == (none[0] + lo * layer, none[1] + (lo + more) * layer)
        assert got[0] <= got[1]
