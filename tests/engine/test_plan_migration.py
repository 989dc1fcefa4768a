"""Schema 1 → 2: a plan saved before the training stack was an input keeps its meaning.

``tests/data/plan_v1_default.memplan`` and ``plan_v1_zero2.memplan`` were written by the
schema-1 MemPlan (main at 094e918), and ``plan_v1_estimates.json`` holds that
version's estimate of each, row by row. A schema-1 file holds every field, so the
migration only drops the informational ``runtime.framework`` and pins what schema 1
meant for fields that did not exist (``parallelism.tp_style``); sections written as
``{}`` get the schema-1 defaults of every field whose default schema 2 changed.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from engine.estimate import estimate
from engine.plan import Plan, default_plan, with_values
from engine.plan_migrations import (
    V1_DEFAULTS,
    V2_DEFAULTS,
    migrate_plan_1_to_2,
    migrate_plan_2_to_3,
)
from engine.planfile import SCHEMA_VERSION, PlanFile, dumps, load
from engine.stacks.defaults import resolved

DATA = Path(__file__).resolve().parents[1] / "data"
V1 = json.loads((DATA / "plan_v1_estimates.json").read_text(encoding="utf-8"))


def _migrated(name: str) -> Plan:
    doc = json.loads((DATA / f"plan_v1_{name}.memplan").read_text(encoding="utf-8"))
    assert doc["schema_version"] == 1 and doc["plan"]["runtime"]["framework"] == "pytorch"
    return Plan.model_validate(migrate_plan_2_to_3(migrate_plan_1_to_2(doc["plan"])))


def _figures(plan: Plan) -> dict[str, Any]:
    e = estimate(plan)
    return {
        "rows": {r.id: [r.low, r.high] for r in e.rows},
        "peak": [e.peak.low, e.peak.high],
        "fit_peak": [e.fit_peak.low, e.fit_peak.high],
        "host": {r.id: [r.low, r.high] for r in e.nodes.host},
    }


REORDERED_SINCE_V1 = (
    "hbm.activations.saved.other",
    "hbm.activations.saved.head",
    "hbm.buckets.reduce_scatter",
    "hbm.grads.before_first_layer",
    # issue 35 item 6: what is left mid-backward (new rows; the default plan's peak is
    # still at the loss, so the peaks below stay schema 1's)
    "hbm.activations.remaining.middle",
    "hbm.activations.remaining.first_layer",
    "hbm.grads.last_layer",
)
"""Rows the FSDP2 end-of-backward rule re-split after schema 1 (same peaks): the head's
saved tensors left ``saved.other`` for ``saved.head`` (freed by backward's first ops);
FSDP2's reduce-scatter row became one fp32 input at a time (218,112,000 el. × 4 B;
schema 1 added the layer's bf16 gradients and one more input in flight); the gradients
live at backward.end became a row of their own, all but the first layer's."""


WORKSPACES = 2 * 33_554_432
"""The default plan's cuBLAS workspaces on H100: the forward's and backward's (handle,
stream), 32 MiB each on Hopper (CublasHandlePool.cpp parseChosenWorkspaceSize), which
PyTorch allocates through its caching allocator; schema 1 counted one 8–32 MiB handle
outside PyTorch (``hbm.runtime.cublas``), so the allocated peak gains them and the fit
peak gains them, less that band, plus the pinned 0.05–0.2 reserve fraction of them."""


def _assert_v1_bytes(figures: dict[str, Any]) -> None:
    """Schema 1's default-plan figures, but for the re-split rows, whose sums are
    checked: saved.other + saved.head = schema 1's saved.other; and the cuBLAS
    workspaces (:data:`WORKSPACES`), now allocated bytes."""
    v1 = V1["default"]
    assert figures["host"] == v1["host"]
    assert figures["peak"] == [v1["peak"][0] + WORKSPACES, v1["peak"][1] + WORKSPACES]
    old_cublas = v1["rows"]["hbm.runtime.cublas"]
    assert old_cublas == [8 * 2**20, 32 * 2**20]
    for i, fraction in enumerate((0.05, 0.2)):  # int() of the reserve: within a byte
        grown = WORKSPACES - old_cublas[i] + WORKSPACES * fraction
        assert abs(figures["fit_peak"][i] - v1["fit_peak"][i] - grown) <= 1
    rows, old = figures["rows"], v1["rows"]
    assert rows["hbm.runtime.cublas"] == [WORKSPACES, WORKSPACES]
    moved = (*REORDERED_SINCE_V1, "hbm.runtime.cublas", "hbm.runtime.allocator_reserve")
    kept = {r: b for r, b in rows.items() if r not in moved}
    assert kept == {r: b for r, b in old.items() if r not in moved}
    other, head = rows["hbm.activations.saved.other"], rows["hbm.activations.saved.head"]
    assert [other[0] + head[0], other[1] + head[1]] == old["hbm.activations.saved.other"]
    assert rows["hbm.buckets.reduce_scatter"] == [218_112_000 * 4] * 2
    before = rows["hbm.grads.before_first_layer"][0]
    assert before < rows["hbm.grads"][0] == old["hbm.grads"][0]


def test_a_v1_default_plan_estimates_to_the_same_bytes() -> None:
    """The default plan (FSDP2): every row but the re-split ones, the allocated and the
    fit peaks and the host ledger are byte-identical to schema 1's estimate, because the
    migration pins the schema-1 NCCL band and allocator reserve it relied on."""
    _assert_v1_bytes(_figures(_migrated("default")))


def test_a_v1_zero2_plan_keeps_its_inputs() -> None:
    """A schema-1 ZeRO-2 plan keeps schema 1's autocast policy, fp32 gradients, foreach
    step, meta-device load and runtime bands (it does not silently become a bf16
    DeepSpeed plan); rows the fixes did not touch keep their bytes (weights, gradients,
    moments, saved activations, loss; the autocast copies lost the untied embedding's
    phantom cast in fix F, and the buckets and step rows follow fixes C and I)."""
    plan = _migrated("zero2")
    p = plan.method.precision
    assert (p.policy, p.grad_dtype) == ("autocast", "fp32")
    assert plan.method.optimizer.implementation == "foreach"
    assert plan.host.model_init == "meta"
    assert (
        resolved(plan).runtime.nccl_bytes_per_communicator
        == plan.runtime.nccl_bytes_per_communicator
    )
    rows = _figures(plan)["rows"]
    for rid in (
        "hbm.weights",
        "hbm.grads",
        "hbm.optimizer.exp_avg",
        "hbm.optimizer.exp_avg_sq",
        "hbm.activations.saved.layers",
        "hbm.loss.saved",
    ):
        assert rows[rid] == V1["zero2"]["rows"][rid], rid


def test_sections_written_empty_take_the_schema_1_defaults() -> None:
    """``{}`` meant every default: after migration the fields schema 2 made ``auto`` (or
    widened) hold their schema-1 values, so the plan equals the default plan with those
    values spelled out."""
    v1 = {s: {} for s in ("model", "method", "batch", "parallelism", "hardware")}
    v1 |= {s: {} for s in ("offload", "host", "checkpoint", "runtime", "policy")}
    plan = Plan.model_validate(migrate_plan_2_to_3(migrate_plan_1_to_2(v1)))
    spelled = with_values(default_plan(), dict(V1_DEFAULTS + V2_DEFAULTS))
    assert plan == spelled
    _assert_v1_bytes(_figures(plan))


def test_the_migration_never_overrides_a_stored_value() -> None:
    v1: dict[str, Any] = {"method": {"precision": {"policy": "amp_master"}}, "runtime": {}}
    out = migrate_plan_1_to_2(v1)
    assert out["method"]["precision"]["policy"] == "amp_master"
    assert out["method"]["precision"]["grad_dtype"] == "fp32"
    assert out["stack"] == {"name": "auto"}
    assert v1 == {"method": {"precision": {"policy": "amp_master"}}, "runtime": {}}


def test_opening_a_v1_file_upgrades_it_and_says_so() -> None:
    """Through the loader: a schema-1 file opens as schema 2, says it was upgraded, and
    estimates to schema 1's bytes; saved again it is a schema-2 file with a stack."""
    pf = load(DATA / "plan_v1_default.memplan")
    assert pf.upgraded_from == 1
    assert any("upgraded" in m for m in pf.extra_messages)
    _assert_v1_bytes(_figures(pf.plan))
    doc = json.loads(dumps(pf))
    assert doc["schema_version"] == SCHEMA_VERSION == 3
    assert doc["plan"]["stack"] == {"name": "auto"}
    assert "framework" not in doc["plan"]["runtime"]


def test_a_schema_2_file_from_before_workload_and_acceptance_opens_with_their_defaults(
    tmp_path: Path,
) -> None:
    """Files written by schema 2 before the workload and acceptance sections existed have
    neither: they meant padded samples, eager mode and the default thresholds, so they
    open as the same plan with those sections at their defaults (not 'required section
    is missing')."""
    doc = json.loads(dumps(PlanFile(default_plan())))
    del doc["plan"]["workload"], doc["plan"]["acceptance"]
    path = tmp_path / "early-v2.memplan"
    path.write_text(json.dumps(doc), encoding="utf-8")
    assert load(path).plan == default_plan()


def test_one_migration_keeps_both_schema_2_changes_meaning() -> None:
    """Schema 2 made the stack an input *and* folded EP over TP × CP × DP; the single
    1 → 2 migration keeps both meanings at once. A schema-1 MoE section with EP 8 × DP 2
    (16 ranks, 16 replicas: schema 1 counted world = TP·PP·CP·EP·DP) becomes DP 16 with
    EP 8, still 16 ranks; the fields schema 2 added or made ``auto`` hold schema 1's values
    (vocab-parallel TP, the even split, autocast); the stack is ``auto``."""
    v1: dict[str, Any] = {
        "model": {"preset": "mixtral-8x7b"},
        "parallelism": {"ep": 8, "dp": 2, "tp": 2},
        "method": {},
    }
    out = migrate_plan_1_to_2(v1)
    par = out["parallelism"]
    assert (par["ep"], par["dp"], par["tp"]) == (8, 16, 2)
    assert par["tp_style"] == "vocab_parallel" and par["pp_split_policy"] == "even"
    assert out["method"]["precision"]["policy"] == "autocast"
    assert out["stack"] == {"name": "auto"}
    assert v1["parallelism"] == {"ep": 8, "dp": 2, "tp": 2}


def test_a_schema_2_plan_keeps_the_fraction_reserve_and_its_headroom() -> None:
    """Schema 3 changed three defaults (the reserve model, expandable_segments, the
    headroom); a schema-2 plan that left them out meant schema 2's, so the migration
    writes those in, and what the file set stays as set."""
    out = migrate_plan_2_to_3({"runtime": {}, "policy": {"headroom_percent": 5.0}})
    assert out["runtime"] == {"reserve_model": "fraction", "expandable_segments": False}
    assert out["policy"] == {"headroom_percent": 5.0}
    bare = migrate_plan_2_to_3({})
    assert bare["policy"] == {"headroom_percent": 10.0}
    plan = Plan.model_validate(bare)
    assert plan.runtime.reserve_model == "fraction" and plan.policy.headroom_percent == 10.0
    assert default_plan().runtime.reserve_model == "allocator"
    assert default_plan().policy.headroom_percent == 0.0
