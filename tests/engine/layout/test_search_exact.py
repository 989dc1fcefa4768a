"""The search's pruning is sound: its counts equal brute force on small lattices.

Brute force estimates every legal layout of every world size up to the bound and takes
the cheapest that fits (the plan's own layout among them); the search estimates a few
per shape, pruning by DP regimes and cost (``engine/layout/search.py``). Plans are
~0.2–0.5B-parameter models on small HBM capacities, so the runtime rows (NCCL buffers per
communicator, DDP buckets, HSDP replicate groups) are as large as the sharded states
and every non-monotone step the search must respect is in play: DP 1 → 2, the expert DP
group appearing, HSDP's shard group moving, ranks per node still growing, FSDP padding.
"""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.estimate import estimate
from engine.layout.counts import gpu_counts
from engine.layout.lattice import LayoutPreferences, enumerate_layouts, layout_of, with_layout
from engine.layout.search import procurement
from engine.plan import Plan, default_plan, with_values

STRATEGIES = [
    "ddp",
    "zero1",
    "zero2",
    "zero3",
    "fsdp1_full_shard",
    "fsdp2",
    "fsdp2_hsdp",
    "megatron_distopt",
]


@st.composite
def search_plans(draw: st.DrawFn) -> tuple[Plan, int]:
    moe = draw(st.booleans())
    arch: dict[str, Any] = {
        "family": "llama",
        "hidden": 1024,
        "layers": draw(st.sampled_from([3, 4, 8])),
        "heads": 8,
        "kv_heads": draw(st.sampled_from([2, 8])),
        "intermediate": 2752,
        "vocab": draw(st.sampled_from([32000, 32001])),  # odd vocab: FSDP padding
    }
    if moe:
        arch.update(
            family="mixtral", moe={"num_experts": 4, "top_k": 2, "expert_intermediate": 2048}
        )
    hold = draw(st.sampled_from(["micro_batch", "global_batch"]))
    changes: dict[str, Any] = {
        "model.architecture": arch,
        "batch.seq_len": draw(st.sampled_from([1024, 2048])),
        "batch.micro_batch": draw(st.sampled_from([1, 2])),
        "batch.hold_fixed": hold,
        "parallelism.dp": 1,
        "parallelism.strategy": draw(st.sampled_from(STRATEGIES)),
        "method.recompute.policy": draw(st.sampled_from(["none", "full"])),
        "hardware.gpus_per_node": draw(st.sampled_from([2, 4, 8])),
        "hardware.usable_hbm_bytes": draw(st.integers(2_500_000_000, 8_000_000_000)),
        "policy.headroom_percent": 0.0,
        "policy.rounding": draw(st.sampled_from(["node", "gpu"])),
    }
    if hold == "global_batch":
        changes["batch.global_batch"] = draw(st.sampled_from([8, 12, 16]))
        changes["batch.grad_accum"] = changes["batch.global_batch"] // changes["batch.micro_batch"]
    return with_values(default_plan(), changes), draw(st.integers(2, 16))


def _brute(
    plan: Plan, max_gpus: int, prefs: LayoutPreferences, figure: str, node: bool
) -> int | None:
    """The least cost of a fitting layout: every legal layout of every world estimated."""
    g, rounding = plan.hardware.gpus_per_node, plan.policy.rounding

    def cost(w: int) -> int:
        return procurement(w, g, rounding) if node else w

    def fits(p: Plan) -> bool:
        e = estimate(p, decisive_only=True)
        value = e.fit_peak.high if figure == "high" else e.fit_peak.low
        return value <= e.limit_bytes and not e.nodes.problems()

    best: int | None = None
    own = layout_of(plan)
    if own.world_size <= max_gpus and fits(plan):
        best = cost(own.world_size)
    for w in range(1, max_gpus + 1):
        if best is not None and cost(w) >= best:
            break
        if any(fits(with_layout(plan, lay)) for lay in enumerate_layouts(plan, w, prefs).legal):
            best = cost(w)
    return best


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(search_plans())
def test_counts_equal_brute_force(case: tuple[Plan, int]) -> None:
    """Arithmetic minimum (relaxed preferences, exact ranks), the procurement count
    (node rounding) and the low end of the validation range, each equal to brute force."""
    plan, max_gpus = case
    prefs = LayoutPreferences()
    c = gpu_counts(plan, max_gpus=max_gpus, budget_s=None)
    assert c.first_layout.gpus == _brute(plan, max_gpus, prefs, "high", True)
    assert c.arithmetic_min.gpus == _brute(plan, max_gpus, prefs.relaxed(), "high", False)
    assert c.validation_low.gpus == _brute(plan, max_gpus, prefs, "low", True)
