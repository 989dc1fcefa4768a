"""Decoder layers fold into classes whatever a family calls its layer list.

:func:`engine.ledger.placement.layer_classes` folds layers whose tensors match by name
within the layer, shape, role, kind and expert index; the ledger then works per class,
not per layer. Falcon (``transformer.h.N.…``) and GPT-2 (``h.N.…``) once left every layer
a class of its own — exact numbers, but a 60-layer Falcon-40B estimate placed 153
tensors per stage instead of a few, the slowest dense search of all presets.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings

from engine.ledger.placement import LayerClass, layer_classes, within_layer
from engine.models.inventory import Tensor, build_inventory
from engine.models.presets import preset_names
from engine.models.spec import ArchitectureSpec
from engine.presets import plan_for_model_preset
from tests.engine.models.test_models_properties import dense_specs


@pytest.mark.parametrize("name", ["falcon-40b", "falcon-7b", "gpt2", "llama-3.1-8b"])
def test_a_dense_model_is_one_layer_class(name: str) -> None:
    """Every decoder layer of a dense preset has the same tensors: one class holding
    every layer index."""
    arch = plan_for_model_preset(name).model.architecture
    _, classes = layer_classes(arch)
    assert len(classes) == 1
    assert classes[0].layers == tuple(range(arch.layers))


def test_no_preset_has_more_classes_than_layer_kinds() -> None:
    """At most two kinds of decoder layer exist in the presets (dense and MoE; DeepSeek's
    first dense layers, Llama-4's interleaved MoE), so no preset folds into more than
    two classes, and the classes partition the layers."""
    for name in preset_names():
        arch = plan_for_model_preset(name).model.architecture
        _, classes = layer_classes(arch)
        assert len(classes) <= 2, name
        layers = sorted(i for c in classes for i in c.layers)
        assert layers == list(range(arch.layers)), name


def test_the_classes_are_built_once_per_architecture() -> None:
    """Every estimate asks for the classes several times (stage splits, decisive stages,
    placement): they are cached on the frozen architecture, so asking again returns the
    same object rather than walking a 90,000-tensor inventory again."""
    arch = plan_for_model_preset("falcon-40b").model.architecture
    assert layer_classes(arch) is layer_classes(arch)


def _folded_whole(arch: ArchitectureSpec) -> tuple[tuple[Tensor, ...], tuple[LayerClass, ...]]:
    """The classes by folding every tensor of the whole inventory, layer by layer (what
    ``layer_classes`` did before it built one layer per kind): the root tensors are those
    with no layer index in checkpoint order; a class is the first layer of each signature
    (names within the layer, shapes, roles, kinds, expert indices) with every layer index
    that has it."""
    root: list[Tensor] = []
    by_layer: dict[int, list[Tensor]] = {}
    for t in build_inventory(arch):
        if t.layer is None:
            root.append(t)
        else:
            by_layer.setdefault(t.layer, []).append(t)
    classes: dict[tuple[object, ...], tuple[list[Tensor], list[int]]] = {}
    for layer, ts in by_layer.items():
        signature = tuple(
            (within_layer(t.name, layer), t.shape, t.role, t.kind, t.expert) for t in ts
        )
        classes.setdefault(signature, (ts, []))[1].append(layer)
    return tuple(root), tuple(LayerClass(tuple(ts), tuple(ls)) for ts, ls in classes.values())


_VARIANTS: tuple[tuple[str, dict[str, Any]], ...] = (
    ("deepseek-v3", {"mtp_layers": 1}),
    ("qwen3-30b-a3b", {"moe.expert_storage": "stacked"}),
    ("mixtral-8x7b", {"moe.expert_storage": "fused_gate_up"}),
)


def _variant(name: str, change: dict[str, Any]) -> ArchitectureSpec:
    arch = plan_for_model_preset(name).model.architecture
    for key, value in change.items():
        if key.startswith("moe."):
            assert arch.moe is not None
            moe = arch.moe.model_copy(update={key[4:]: value})
            arch = arch.model_copy(update={"moe": moe})
        else:
            arch = arch.model_copy(update={key: value})
    return arch


@pytest.mark.parametrize("name", preset_names())
def test_classes_equal_folding_the_whole_inventory(name: str) -> None:
    """Building one layer per kind gives the very classes (representative tensors, layer
    indices, order) and root tensors that folding all of ``build_inventory`` gives, on
    every preset: the ledger's arithmetic reads nothing else of the inventory."""
    arch = plan_for_model_preset(name).model.architecture
    assert layer_classes(arch) == _folded_whole(arch)


@pytest.mark.parametrize(("name", "change"), _VARIANTS)
def test_classes_equal_folding_with_mtp_and_expert_storages(
    name: str, change: dict[str, Any]
) -> None:
    """The same with an MTP module (routed experts outside the layers) and with the
    stacked and fused expert storages (one tensor for every expert of a layer)."""
    arch = _variant(name, change)
    assert layer_classes(arch) == _folded_whole(arch)


@settings(max_examples=60, deadline=None)
@given(dense_specs())
def test_classes_equal_folding_on_random_specs(arch: ArchitectureSpec) -> None:
    """Random dense and MoE specs (first dense layers anywhere from none to all)."""
    assert layer_classes(arch) == _folded_whole(arch)
