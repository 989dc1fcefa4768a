"""Which config a trace builds from: ``--hf-config``, the plan's import, or the fields."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from engine.plan import Plan, with_values
from engine.trace.config_source import config_source, describes_architecture, ledger_overrides
from engine.trace.hf_arch import hf_config_kwargs
from tests.trace.grid import Case
from tests.trace.needs_extra import needs_trace_extra


def imported(plan: Plan, **changes: Any) -> dict[str, Any]:
    """The config.json a plan's architecture would have been imported from."""
    model_type, kwargs = hf_config_kwargs(plan.model.architecture)
    given = {k: v for k, v in kwargs.items() if v is not None}
    return {"model_type": model_type, "torch_dtype": "bfloat16", **given, **changes}


PLAN = Case("mistral", {"strategy": "fsdp4"}).plan()
CONFIG = imported(PLAN, sliding_window=128)
WITH_IMPORT = with_values(PLAN, {"model.hf_config": CONFIG})


def test_no_import_builds_from_the_fields() -> None:
    source = config_source(PLAN)
    assert (source.config, source.origin, source.notes) == (None, "fields", ())


def test_the_plan_s_import_is_used_while_it_describes_the_fields() -> None:
    assert describes_architecture(WITH_IMPORT, CONFIG)
    source = config_source(WITH_IMPORT)
    assert source.origin == "plan" and source.config == CONFIG
    assert source.notes == ("built from the plan's imported config.json (mistral)",)


def test_an_import_edited_away_from_is_set_aside_with_a_note() -> None:
    edited = with_values(WITH_IMPORT, {"model.architecture.layers": 3})
    source = config_source(edited)
    assert source.origin == "fields" and source.config is None
    assert "no longer describes its architecture fields" in source.notes[0]


def test_the_override_wins() -> None:
    other = {**CONFIG, "num_hidden_layers": 5}
    source = config_source(WITH_IMPORT, other)
    assert source.origin == "override" and source.config == other


def test_ledger_overrides_switch_off_windows_and_mtp() -> None:
    """Layer types (Qwen2, Gemma) go all-full; a plain window (Mistral) goes; MTP goes."""
    gemma = SimpleNamespace(layer_types=["sliding_attention", "full_attention"], sliding_window=4)
    assert ledger_overrides(gemma) == {"layer_types": ["full_attention"] * 2}
    qwen = SimpleNamespace(layer_types=["full_attention"], use_sliding_window=True)
    assert ledger_overrides(qwen) == {"use_sliding_window": False}
    assert ledger_overrides(SimpleNamespace(sliding_window=4096)) == {"sliding_window": None}
    assert ledger_overrides(SimpleNamespace(num_nextn_predict_layers=1)) == {
        "num_nextn_predict_layers": 0
    }
    assert ledger_overrides(SimpleNamespace(sliding_window=None)) == {}


@needs_trace_extra
def test_a_trace_of_the_imported_config_is_the_ledger_s_model() -> None:
    """The imported Mistral config has a 128-token window over a 256-token sequence;
    traced with the window switched off it allocates exactly what the fields build
    (with the window SDPA would leave its flash path on fake CPU tensors)."""
    from engine.trace.runner import trace_plan

    from_fields, from_import = trace_plan(PLAN), trace_plan(WITH_IMPORT)
    assert from_import.peak_bytes == from_fields.peak_bytes
    assert "built from the plan's imported config.json (mistral)" in from_import.notes
