"""Row ids are user-facing keys only: renaming every id changes no number.

Every row is built by the one factory :func:`engine.ledger.row.make_row`; these tests
replace it with one that renames each id (a prefix, then a permutation of the real ids
among the rows), and check that every total, phase, moment, stage, node ledger and
verdict of a set of varied plans is unchanged. If any code still decided something from
an id (a prefix table, an ``id ==`` test), some figure here would move.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from typing import Any

import pytest

import engine.ledger.row as row_module
from engine.cli.common import apply_sets, with_model
from engine.estimate import Estimate, estimate
from engine.ledger.row import MOMENTS, PHASES, Row, moments_in
from engine.plan import Plan, default_plan
from tests.golden.cases import CASES

EXTRA: dict[str, list[str]] = {
    "fsdp2-accumulate-without-sync": [
        "--set",
        "batch.grad_accum=4",
        "--set",
        "parallelism.knobs.accumulate_without_sync=true",
    ],
    "fsdp2-reshard-int": ["--set", "parallelism.knobs.fsdp_reshard_after_forward=2"],
    "fsdp1-hybrid-ga2": [
        "--set",
        "parallelism.strategy=fsdp1_hybrid_shard",
        "--set",
        "parallelism.dp=16",
        "--set",
        "batch.grad_accum=2",
    ],
    "fsdp2-cpu-offload": ["--set", "offload.params=cpu", "--set", "offload.optimizer=cpu"],
    "framework-visible-eager": [
        "--set",
        "hardware.usable_policy=framework_visible",
        "--set",
        "runtime.attention=eager",
        "--set",
        "runtime.loss=chunked",
    ],
}


def plan_of(args: list[str]) -> Plan:
    """A plan from golden-case arguments (``--preset NAME``, ``--set PATH=VALUE``)."""
    plan, sets = default_plan(), []
    it = iter(args)
    for flag in it:
        value = next(it)
        if flag == "--preset":
            plan = with_model(plan, value)
        else:
            sets.append(value)
    return apply_sets(plan, sets)


PLANS: dict[str, Plan] = {name: plan_of(args) for name, args in {**CASES, **EXTRA}.items()}


def _clear_engine_caches() -> None:
    """Forget cached rows (they carry ids) in every engine module."""
    for name, mod in list(sys.modules.items()):
        if name.startswith("engine."):
            for value in list(vars(mod).values()):
                clear = getattr(value, "cache_clear", None)
                if callable(clear):
                    clear()


@pytest.fixture
def rename(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[Callable[[str], str]], None]]:
    """Make the row factory rename ids through a mapping, wherever it was imported."""
    original = row_module.make_row

    def install(mapping: Callable[[str], str]) -> None:
        def renamed(**kwargs: Any) -> Row:
            return original(**{**kwargs, "id": mapping(kwargs["id"])})

        for mod in list(sys.modules.values()):
            if getattr(mod, "make_row", None) is original:
                monkeypatch.setattr(mod, "make_row", renamed)
        _clear_engine_caches()

    _clear_engine_caches()
    yield install
    monkeypatch.undo()
    _clear_engine_caches()


def _rows(rows: tuple[Row, ...]) -> list[tuple[object, ...]]:
    return [(r.label, r.state, r.location, r.kind, r.low, r.high, r.moments) for r in rows]


def signature(est: Estimate) -> dict[str, object]:
    """Everything an estimate reports except the ids."""
    stages = [
        (
            st.stage,
            st.layers,
            st.phases,
            st.peak_phase,
            st.peak,
            st.moments,
            st.reserved_phases,
            st.reserved_peak,
            st.device_peak,
            st.fit_peak,
            st.peak_moments,
            _rows(st.rows),
            [_rows(st.phase_rows(ph)) for ph in PHASES],
        )
        for st in est.stages
    ]
    n = est.nodes
    return {
        "verdict": (est.verdict, est.verdict_reason, est.heaviest_stage, est.limit_bytes),
        "totals": est.totals(),
        "stages": stages,
        "nodes": (
            _rows(n.host),
            _rows(n.nvme),
            _rows(n.checkpoint),
            n.host_peak,
            n.nvme_peak,
            n.checkpoint_peak,
            n.pinned,
            n.problems(),
            n.transfers,
        ),
    }


def all_ids(est: Estimate) -> set[str]:
    n = est.nodes
    rows = [r for st in est.stages for r in st.rows] + [*n.host, *n.nvme, *n.checkpoint]
    return {r.id for r in rows}


def test_prefixing_every_id_changes_no_figure(
    rename: Callable[[Callable[[str], str]], None],
) -> None:
    """Every id becomes ``x.<id>``: no prefix a rule could match survives."""
    before = {name: signature(estimate(p)) for name, p in PLANS.items()}
    rename(lambda rid: f"x.{rid}")
    for name, plan in PLANS.items():
        est = estimate(plan)
        assert all(".x." in i or i.startswith("x.") for i in all_ids(est)), name
        assert signature(est) == before[name], name


def test_permuting_the_ids_among_the_rows_changes_no_figure(
    rename: Callable[[Callable[[str], str]], None],
) -> None:
    """Each id is replaced by the next real id in sorted order, so every row carries
    another row's name (the grads row may be called ``hbm.gathered.layers``)."""
    ests = {name: estimate(p) for name, p in PLANS.items()}
    before = {name: signature(e) for name, e in ests.items()}
    known = sorted(set().union(*(all_ids(e) for e in ests.values())))
    nxt = {rid: known[(i + 1) % len(known)] for i, rid in enumerate(known)}
    rename(lambda rid: nxt.get(rid, rid))
    for name, plan in PLANS.items():
        est = estimate(plan)
        assert all_ids(est) != all_ids(ests[name]), name
        assert signature(est) == before[name], name


def test_every_row_is_live_only_at_moments_of_its_phases() -> None:
    """A row's moments (and its moments under accumulation) lie within its phases."""
    for name, plan in PLANS.items():
        for st in estimate(plan).stages:
            for r in st.rows:
                allowed = moments_in(r.phases)
                assert r.moments <= allowed, (name, r.id)
                assert r.accumulated_moments <= allowed, (name, r.id)
                assert {m for m, _ in MOMENTS} >= r.moments
