"""The input tabs mark the fields a legality problem names (Problem.fields and the
pydantic error's fields), each with the rule's own sentence, and clear them once fixed.

Default plan: Llama-3.1-8B, 32 layers, 32 heads / 8 KV heads.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from gui.document import PlanDocument
from gui.tabs.model import ModelTab
from gui.tabs.parallelism import ParallelismTab

TP_HEADS = "parallelism.tp (3) must divide the 32 attention heads (model.architecture.heads)"
TP_KV = (
    "parallelism.tp (12) must divide the 8 KV heads (model.architecture.kv_heads) "
    "or be a multiple of them"
)
PP_LAYERS = "parallelism.pp (40) exceeds the model's 32 layers (model.architecture.layers)"


@pytest.fixture
def tabs(qtbot: Any) -> Iterator[tuple[PlanDocument, ModelTab, ParallelismTab]]:
    doc = PlanDocument()
    model, parallel = ModelTab(doc, "gb"), ParallelismTab(doc, "gb")
    qtbot.addWidget(model)
    qtbot.addWidget(parallel)
    yield doc, model, parallel


def error(tab: Any, path: str) -> str:
    return str(tab.bindings[path].editor.property("error_message") or "")


def test_illegal_tp_marks_tp_and_the_heads(
    tabs: tuple[PlanDocument, ModelTab, ParallelismTab],
) -> None:
    """TP 3 on 32 heads: the engine's problem names parallelism.tp and
    model.architecture.heads; both are marked with its sentence, nothing else is,
    and TP 2 clears both while the estimate comes back."""
    doc, model, parallel = tabs
    assert doc.set("parallelism.tp", 3)
    doc.flush()
    assert doc.stale
    assert error(parallel, "parallelism.tp") == TP_HEADS
    assert error(model, "model.architecture.heads") == TP_HEADS
    assert error(model, "model.architecture.kv_heads") == ""
    assert error(parallel, "parallelism.dp") == ""
    assert doc.set("parallelism.tp", 2)
    doc.flush()
    assert not doc.stale
    assert error(parallel, "parallelism.tp") == ""
    assert error(model, "model.architecture.heads") == ""


def test_kv_heads_problem_marks_the_kv_heads_not_the_heads(
    tabs: tuple[PlanDocument, ModelTab, ParallelismTab],
) -> None:
    """24 heads / 8 KV heads (head_dim 128 keeps the 4096 hidden) with TP 12: TP divides
    the heads but neither divides the 8 KV heads nor is a multiple of them, so the KV
    rule marks model.architecture.kv_heads and TP, not model.architecture.heads."""
    doc, model, parallel = tabs
    changes = {
        "model.architecture.heads": 24,
        "model.architecture.head_dim": 128,
        "parallelism.tp": 12,
    }
    assert doc.set_many(changes, "heads")
    doc.flush()
    assert error(model, "model.architecture.kv_heads") == TP_KV
    assert error(parallel, "parallelism.tp") == TP_KV
    assert error(model, "model.architecture.heads") == ""


def test_load_time_rule_marks_every_field_it_names(
    tabs: tuple[PlanDocument, ModelTab, ParallelismTab],
) -> None:
    """PP 40 > 32 layers is refused at the edit (the plan validator): the edited field
    and the layers field, which the rule also names, are marked; the plan is unchanged;
    the next accepted edit clears both."""
    doc, model, parallel = tabs
    before = doc.plan
    assert not doc.set("parallelism.pp", 40)
    assert doc.plan is before
    assert error(parallel, "parallelism.pp") == PP_LAYERS
    assert error(model, "model.architecture.layers") == PP_LAYERS
    assert doc.set("parallelism.pp", 2)
    assert error(parallel, "parallelism.pp") == ""
    assert error(model, "model.architecture.layers") == ""
