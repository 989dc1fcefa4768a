"""A stage's placement composed from its layer classes' (each class's tensors placed
once per TP / EP placement, :func:`engine.ledger.placement.place_stage`) must equal
placing every tensor of the stage anew, tensor for tensor and in the same order.

The reference below is that direct placement (what ``place_stage`` did before it was
composed), with the same per-tensor rules (``place_tensor``, ``experts_folded``): what it
checks is the composition — each class's parts cached per placement and counted into
the stage —, which the layout search alone ever sees. The two are compared on MoE and
dense presets at random TP, EP, expert TP, TP style and pipeline splits.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from engine.ledger.placement import (
    LocalTensor,
    count_in,
    experts_folded,
    layer_classes,
    place_stage,
    place_tensor,
    stage_layer_ranges,
)
from engine.models.spec import ArchitectureSpec
from engine.presets import plan_for_model_preset
from engine.sections.parallel import ParallelismSection

PRESETS = ("deepseek-v3", "llama-4-maverick", "llama-3.1-8b")


def reference_place(
    arch: ArchitectureSpec, par: ParallelismSection, stage: int
) -> tuple[LocalTensor, ...]:
    """Every tensor of the stage placed anew (the direct way)."""
    layers = stage_layer_ranges(arch, par)[stage]
    first, last = stage == 0, stage == par.pp - 1
    root, classes = layer_classes(arch)
    out: list[LocalTensor] = []
    for t in root:
        if t.role in ("embedding", "position_embedding"):
            if not (first or (last and arch.tied_embeddings and t.role == "embedding")):
                continue
        elif not last:
            continue
        placed = place_tensor(t, arch, par, 1)
        if placed is not None:
            out.append(placed)
    n_experts = arch.moe.num_experts if arch.moe else 1
    for cls in classes:
        count = sum(1 for layer in cls.layers if layer in layers)
        if count:
            for t, kept in experts_folded(cls.tensors, n_experts, par.ep):
                placed = place_tensor(t, arch, par, count * kept)
                if placed is not None:
                    out.append(placed)
    return tuple(out)


def _key(t: LocalTensor) -> tuple[object, ...]:
    return (t.tensor, t.shape, t.expert, t.count, t.numel)


@settings(max_examples=60, deadline=None)
@given(
    preset=st.sampled_from(PRESETS),
    tp=st.sampled_from((1, 2, 3, 4, 8)),
    ep=st.sampled_from((1, 2, 3, 8, 64)),
    expert_tp=st.sampled_from((1, 2, 4)),
    style=st.sampled_from(("auto", "vocab_parallel", "replicated_embedding", "replicated")),
    pp=st.integers(1, 17),
    policy=st.sampled_from(("auto", "even", "weighted")),
)
def test_composed_placement_is_the_direct_one(
    preset: str, tp: int, ep: int, expert_tp: int, style: str, pp: int, policy: str
) -> None:
    plan = plan_for_model_preset(preset)
    arch = plan.model.architecture
    update = {"tp": tp, "ep": ep, "expert_tp": expert_tp, "tp_style": style}
    par = plan.parallelism.model_copy(update={**update, "pp": pp, "pp_split_policy": policy})
    assert isinstance(par, ParallelismSection)
    for stage in range(pp):
        got = place_stage(arch, par, stage)
        assert [_key(t) for t in got] == [_key(t) for t in reference_place(arch, par, stage)]


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.integers(0, 40), max_size=30, unique=True),
    st.integers(-3, 45),
    st.integers(-3, 45),
    st.sampled_from([1, 1, 1, 2, -1]),
)
def test_layers_counted_in_a_range_as_one_test_per_index(
    indices: list[int], start: int, stop: int, step: int
) -> None:
    """:func:`~engine.ledger.placement.count_in` bisects the sorted indices (in any
    order, as often as asked) where the per-index test counts each."""
    layers = range(start, stop, step)
    shuffled = tuple(reversed(indices)) if start % 2 else tuple(indices)
    want = sum(map(layers.__contains__, shuffled))
    assert count_in(shuffled, layers) == want
    assert count_in(shuffled, layers) == want  # answered from the sorted copy
