"""Decoder layers fold into classes whatever a family calls its layer list.

:func:`engine.ledger.placement.layer_classes` folds layers whose tensors match by name
within the layer, shape, role, kind and expert index; the ledger then works per class,
not per layer. Falcon (``transformer.h.N.…``) and GPT-2 (``h.N.…``) once left every layer
a class of its own — exact numbers, but a 60-layer Falcon-40B estimate placed 153
tensors per stage instead of a few, the slowest dense search of all presets.
"""

from __future__ import annotations

import pytest

from engine.ledger.placement import layer_classes
from engine.models.presets import preset_names
from engine.presets import plan_for_model_preset


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
