"""Activation parts cached on exactly what they read, not on the plan, answer every plan.

The layer kinds' saved terms, the working set's term lists, the final norm's terms,
the module buffers and their bytes (:mod:`engine.ledger.activations.stage_layers`,
:mod:`~engine.ledger.activations.working`, :mod:`~engine.ledger.activations.inputs`)
are cached on the fields they read (architecture, geometry at one sequence,
trainability, profile, attention, recompute policy, FSDP2's EP), so layouts differing
elsewhere — DP, PP and its split, EP, the strategy — share them, as do a make-up's
fixed parts at one micro-batch size (:mod:`engine.ledger.stage_rows`). A plan's
activation rows built after other layouts of the same model filled those caches must
equal, byte and word, the rows built with every engine cache empty.
"""

from __future__ import annotations

import sys
from functools import _lru_cache_wrapper
from typing import Any

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from engine.estimate import estimate
from engine.ledger.activations.rows import activation_rows
from engine.ledger.placement import stage_layer_ranges
from engine.ledger.row import Row
from engine.ledger.stage_rows import stage_rows
from engine.ledger.states.persistent import stage_placed
from engine.legality.checks import plan_problems
from engine.plan import Plan, with_values
from engine.stacks.defaults import resolved
from tests.engine.ledger.test_estimate_folding import pipelined


def _clear_engine_caches() -> None:
    """Empty every module-level functools cache of the engine (a cold start)."""
    for name, module in list(sys.modules.items()):
        if name == "engine" or name.startswith("engine."):
            for obj in list(vars(module).values()):
                if isinstance(obj, _lru_cache_wrapper):
                    obj.cache_clear()


def _activation_rows(plan: Plan) -> list[list[Row]]:
    """Each stage's activation rows as the estimate lists them (through its cached
    make-up parts) and as the layout search's floors build them (no tensors placed)."""
    out = []
    ranges = stage_layer_ranges(plan.model.architecture, plan.parallelism)
    for stage in range(plan.parallelism.pp):
        rows = stage_rows(plan, stage)
        out.append([r for r in rows if r.state in ("activations", "inputs", "buffers")])
        out.append(activation_rows(plan, stage, len(ranges[stage]), ()))
        out.append(activation_rows(plan, stage, len(ranges[stage]), stage_placed(plan, stage)))
    return out


def _layout(plan: Plan, changes: dict[str, Any]) -> Plan | None:
    try:
        r = resolved(with_values(plan, changes))
    except ValueError:
        return None
    return None if plan_problems(r) else r


LAYOUTS = st.fixed_dictionaries(
    {},
    optional={
        "parallelism.dp": st.sampled_from([1, 2, 4]),
        "parallelism.tp": st.sampled_from([1, 2]),
        "parallelism.ep": st.sampled_from([1, 2]),
        "parallelism.cp": st.sampled_from([1, 2]),
        "parallelism.strategy": st.sampled_from(["fsdp2", "zero3", "megatron_distopt"]),
        "parallelism.pp_layer_split": st.none(),
        "batch.micro_batch": st.integers(1, 4),
    },
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pipelined(), st.lists(LAYOUTS, min_size=1, max_size=3), LAYOUTS)
def test_rows_after_other_layouts_equal_the_cold_rows(
    plan: Plan, others: list[dict[str, Any]], changes: dict[str, Any]
) -> None:
    target = _layout(plan, changes)
    assume(target is not None)
    assert target is not None
    _clear_engine_caches()
    for other in others:  # warm the keyed caches with layouts of the same model
        laid = _layout(plan, other)
        if laid is not None:
            try:
                estimate(laid)
                _activation_rows(laid)
            except NotImplementedError:
                pass
    try:
        warm = _activation_rows(target)
    except NotImplementedError:
        assume(False)
        return
    _clear_engine_caches()
    assert warm == _activation_rows(target)
