"""Qt-free helpers behind the GUI: field parsing, applicability, chart sums, presets."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given
from hypothesis import strategies as st

from engine import hardware_presets
from engine.estimate import estimate
from engine.ledger.row import Row
from engine.plan import default_plan, with_value, with_values
from engine.sections.parallel import ParallelismSection
from gui.applicability import inapplicable, reason_for
from gui.fieldspec import field_specs, format_bytes_field, parse_bytes, parse_number
from gui.views.chart_data import panels, ranks_per_node, stack


def test_parse_bytes_units() -> None:
    """80 GB = 80 × 10^9; 79.1 GiB = 79.1 × 2^30 = 84,932,978,278.4 → 84,932,978,278;
    a bare large integer is bytes, a bare small number is in the field's unit."""
    assert parse_bytes("80 GB") == 80_000_000_000
    assert parse_bytes("79.1 GiB") == 84_932_978_278
    assert parse_bytes("84932558848") == 84_932_558_848
    assert parse_bytes("2", "gib") == 2 * 2**30
    assert parse_bytes("1,024 MiB") == 2**30
    with pytest.raises(ValueError, match="unknown unit"):
        parse_bytes("3 parsecs")


@given(st.integers(min_value=0, max_value=10**15), st.sampled_from(["gb", "gib", "both"]))
def test_byte_fields_show_a_value_that_parses_back_exactly(value: int, units: str) -> None:
    """Showing a byte count must never change it (or undo would see phantom edits)."""
    assert parse_bytes(format_bytes_field(value, units), units) == value


def test_parse_number() -> None:
    assert parse_number("4,096", "int", False) == 4096
    assert parse_number("", "int", True) is None
    with pytest.raises(ValueError, match="whole number"):
        parse_number("2.5", "int", False)
    with pytest.raises(ValueError, match="required"):
        parse_number("", "float", False)


def test_field_specs_carry_metadata() -> None:
    specs = {s.name: s for s in field_specs(ParallelismSection, "parallelism")}
    assert specs["tp"].kind == "int" and specs["tp"].lower == 1 and specs["tp"].upper == 1024
    assert specs["tp"].unit == "ranks"
    assert specs["strategy"].kind == "choice" and "zero3" in specs["strategy"].choices
    assert specs["shard_group_size"].optional
    assert specs["knobs"].kind == "section"


def test_fields_that_do_not_apply_have_reasons() -> None:
    plan = default_plan()
    reasons = inapplicable(plan)
    assert "zero3" in (reason_for("offload.params", reasons) or "")
    assert reason_for("parallelism.knobs.ds_prefetch_bucket_elements", reasons)
    assert reason_for("parallelism.knobs.fsdp_prefetch_units", reasons) is None  # FSDP2
    assert reason_for("parallelism.dp", reasons) is None
    lora = inapplicable(with_value(plan, "method.kind", "lora"))
    assert reason_for("method.lora.rank", lora) is None
    assert reason_for("method.lora.rank", reasons)


def test_phase_bars_sum_the_rows_live_in_each_phase() -> None:
    """Default plan: every row is live in all five phases, so each HBM bar is the peak,
    16,060,671,488 B, stacked weights 4,015,130,624 / gradients 4,015,130,624 /
    optimizer 2 × 4,015,130,624 + 148,992 = 8,030,410,240."""
    plan = default_plan()
    hbm = panels(plan, estimate(plan))[0]
    assert [b.high for b in hbm.bars] == [16_060_671_488] * 5
    assert [(s.group, s.low) for s in hbm.bars[0].segments] == [
        ("weights", 4_015_130_624), ("gradients", 4_015_130_624), ("optimizer", 8_030_410_240)]
    assert sum(b.highlight for b in hbm.bars) == 1


def _host_row(scope: str, low: int, high: int) -> Row:
    return Row(id=f"host.x.{scope}", label="x", location="host", kind="persistent",
               group="offload", low=low, high=high, formula="", source="user-input",
               scope=scope)  # type: ignore[arg-type]


def test_host_panel_per_rank_share_and_per_node() -> None:
    """8 ranks per node. A rank-scoped 10–20 GB row: share 10–20 GB, node 80–160 GB.
    A node-scoped 16 GB row: share 16/8 = 2 GB, node 16 GB. Totals: share 12–22 GB,
    node 96–176 GB; capacities 2 TiB / 8 = 274,877,906,944 B and 2 TiB."""
    plan = default_plan()
    est = estimate(plan)
    rows = (*est.rows, _host_row("rank", 10 * 10**9, 20 * 10**9), _host_row("node", 16 * 10**9,
                                                                              16 * 10**9))
    stage = dataclasses.replace(est.stages[0], rows=rows)
    est = dataclasses.replace(est, stages=(stage,))
    host = panels(plan, est)[1]
    share, node = host.bars
    assert (share.low, share.high) == (12 * 10**9, 22 * 10**9)
    assert (node.low, node.high) == (96 * 10**9, 176 * 10**9)
    assert share.capacity == 274_877_906_944 and node.capacity == 2 * 2**40
    assert stack([]) == ()


def test_ranks_per_node_never_exceeds_the_job() -> None:
    assert ranks_per_node(default_plan()) == 8
    small = with_values(default_plan(), {"parallelism.dp": 2})
    assert ranks_per_node(small) == 2


def test_hardware_presets_apply_cleanly() -> None:
    """Every preset yields a valid plan; node presets without a known RAM figure leave
    the user's value alone instead of inventing one."""
    for acc in hardware_presets.accelerators():
        assert acc.usable_source and acc.hbm_bytes > 0 and acc.usable_hbm_bytes > 0
        with_values(default_plan(), hardware_presets.accelerator_changes(acc.key))
    for node in hardware_presets.nodes():
        plan = with_values(default_plan(), hardware_presets.node_changes(node.key))
        if node.host_ram_bytes_per_node is None:
            assert plan.hardware.host_ram_bytes_per_node == \
                default_plan().hardware.host_ram_bytes_per_node
    h100 = hardware_presets.accelerator("h100-sxm-80gb")
    assert h100.usable_hbm_bytes == default_plan().hardware.usable_hbm_bytes
    with pytest.raises(KeyError, match="unknown accelerator"):
        hardware_presets.accelerator("tpu-v9")
