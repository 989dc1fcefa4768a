"""Every row id in the output is one grep away from the line that builds it.

For the default plan and a ZeRO-3 + NVMe offload plan, each id of every row (stage rows,
allocator reserves, host, NVMe and checkpoint ledgers) is either written out, quoted, in
``engine/ledger/`` — in the module its prefix names — or matches a pattern listed in
``engine.ledger.DYNAMIC_IDS`` whose literal parts are all in the module listed with it.
"""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

from engine.estimate import estimate
from engine.ledger import DYNAMIC_IDS
from engine.plan import Plan, default_plan, with_values

LEDGER = Path(__file__).resolve().parents[3] / "engine" / "ledger"
SOURCES = {p: p.read_text(encoding="utf-8") for p in sorted(LEDGER.rglob("*.py"))}
PLACEHOLDER = re.compile(r"\{[a-z_]+\}")

PLANS: dict[str, Plan] = {
    "default": default_plan(),
    "zero3-nvme": with_values(
        default_plan(),
        {
            "parallelism.strategy": "zero3",
            "offload.optimizer": "nvme",
            "offload.params": "nvme",
        },
    ),
}


def _ids(plan: Plan) -> set[str]:
    est = estimate(plan)
    rows = [r for st in est.stages for r in (*st.rows, *st.phase_reserves.values())]
    n = est.nodes
    return {r.id for r in (*rows, *n.host, *n.nvme, *n.checkpoint)}


def _pattern(template: str) -> re.Pattern[str]:
    parts = PLACEHOLDER.split(template)
    return re.compile("[A-Za-z0-9_.]+".join(re.escape(p) for p in parts) + "$")


def _module_source(module: str) -> str:
    path = importlib.import_module(module).__file__
    assert path is not None
    return Path(path).read_text(encoding="utf-8")


def _literal_homes(rid: str) -> list[Path]:
    return [p for p, text in SOURCES.items() if f'"{rid}"' in text]


@pytest.mark.parametrize("name", sorted(PLANS))
def test_every_row_id_is_written_out_or_listed(name: str) -> None:
    unfound = []
    for rid in sorted(_ids(PLANS[name])):
        if _literal_homes(rid):
            continue
        listed = [(t, m) for t, m in DYNAMIC_IDS if _pattern(t).match(rid)]
        if not listed:
            unfound.append(rid)
            continue
        for template, module in listed:
            source = _module_source(module)
            for part in PLACEHOLDER.split(template):
                assert part.strip(".") in source, (rid, template, module, part)
    assert unfound == []


def test_the_listed_patterns_are_the_ones_in_use() -> None:
    """Each DYNAMIC_IDS pattern names ids these plans produce (no stale entry), and
    no literal id is also claimed by a pattern's module only by accident."""
    ids = set().union(*(_ids(p) for p in PLANS.values()))
    for template, _module in DYNAMIC_IDS:
        assert any(_pattern(template).match(rid) and not _literal_homes(rid) for rid in ids), (
            template
        )


def test_a_prefix_names_the_module_that_builds_the_row() -> None:
    """``hbm.gathered.*`` is built in ``peaks/gathered.py``, ``hbm.loss.*`` in
    ``activations/loss.py`` … (the table in ``engine/ledger/__init__.py``)."""
    homes = {
        "hbm.gathered.layers": "peaks/gathered.py",
        "hbm.loss.saved": "activations/loss.py",
        "hbm.activations.saved.layers": "activations/rows.py",
        "hbm.inputs.batch": "activations/inputs.py",
        "hbm.runtime.nccl": "peaks/runtime.py",
        "hbm.buckets.zero": "peaks/buckets.py",
        "hbm.grads": "states/rows.py",
        "host.nvme_swap.optimizer": "nodes/host.py",
        "checkpoint.weights": "nodes/checkpoint_storage.py",
    }
    ids = set().union(*(_ids(p) for p in PLANS.values()))
    for rid, home in homes.items():
        assert rid in ids, rid
        assert [p.relative_to(LEDGER).as_posix() for p in _literal_homes(rid)] == [home]
