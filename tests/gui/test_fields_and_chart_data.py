"""Qt-free helpers behind the GUI: field parsing, applicability, chart sums, presets."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given
from hypothesis import strategies as st

from engine import presets as hardware_presets
from engine.estimate import estimate
from engine.ledger.row import ALL_PHASES, PHASES, Phase, Row, make_row
from engine.plan import default_plan, with_value, with_values
from engine.sections.parallel import ParallelismSection
from engine.stacks.applicability import inapplicable, reason_for
from gui.fields.fieldspec import field_specs, format_bytes_field, parse_bytes, parse_number
from gui.views.chart_data import FRAGMENTATION_GROUP, panels, stack, stage_bars


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


def test_this_waves_fields_have_units_labels_and_undo_words() -> None:
    """Issue 35/36 fields as the tabs show them: max_split_size_mb counts MiB (PyTorch's
    CUDACachingAllocator parses it × 1024 × 1024), labelled without the "_mb"; the
    allocator bands are float ranges; the Edit menu names each field in words."""
    from engine.sections.runtime import RuntimeSection
    from gui.fields.undo_text import edit_text

    rt = {s.name: s for s in field_specs(RuntimeSection, "runtime")}
    assert rt["max_split_size_mb"].unit == "MiB" and rt["max_split_size_mb"].optional
    assert rt["max_split_size_mb"].label == "Max split size"
    assert rt["reserve_model"].choices == ("allocator", "fraction")
    assert rt["fragmentation"].kind == "section" and rt["expandable_segments"].kind == "bool"
    assert edit_text("runtime.reserve_model", "fraction") == (
        "Set allocator reserve model to fraction"
    )
    assert edit_text("method.optimizer.paged", True) == "Turn paged optimizer on"
    assert edit_text("method.recompute.modules", ["core_attn", "mlp"]) == (
        "Set recompute modules to core_attn, mlp"
    )
    assert edit_text("method.dropout", 0.1) == "Set model dropout to 0.1"
    assert edit_text("runtime.expandable_segments", None) == "Set expandable segments to auto"


def test_the_reserve_models_bands_apply_to_their_own_model_only() -> None:
    """runtime.allocator_reserve is read under reserve_model fraction only, fragmentation
    and side_stream_cache under allocator only (engine/ledger/peaks/runtime.py
    reserve_factors): the other model's bands are greyed with the reason."""
    allocator = inapplicable(default_plan())
    assert "fraction" in (reason_for("runtime.allocator_reserve.low", allocator) or "")
    assert reason_for("runtime.fragmentation.low", allocator) is None
    fraction = inapplicable(with_value(default_plan(), "runtime.reserve_model", "fraction"))
    assert reason_for("runtime.allocator_reserve.high", fraction) is None
    assert reason_for("runtime.side_stream_cache.high", fraction)
    assert reason_for("runtime.fragmentation.low", fraction)


def test_pipeline_and_cp_fields_apply_with_their_dimension() -> None:
    """pp_layout and pp_split_policy choose layers per stage and cp_comm the K/V
    exchange: idle (and greyed) at PP 1 / CP 1, editable once PP or CP is above 1."""
    one = inapplicable(default_plan())
    for path in ("parallelism.pp_layout", "parallelism.pp_split_policy"):
        assert reason_for(path, one) == "applies when PP > 1"
    assert reason_for("parallelism.cp_comm", one) == "applies when CP > 1"
    more = inapplicable(with_values(default_plan(), {"parallelism.pp": 2, "parallelism.cp": 2}))
    for path in ("parallelism.pp_layout", "parallelism.pp_split_policy", "parallelism.cp_comm"):
        assert reason_for(path, more) is None


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


def test_phase_bars_stack_the_rows_live_at_each_phase_peak() -> None:
    """Default plan: each HBM bar is what the fit test compares (engine/verdict.py
    fit_parts): the rows live at its phase's peak moment, the fragmentation the allocator
    cannot release (engine/allocator/reserve.py stuck_extra) and the memory outside the
    allocator except the CUDA context (the capacity is what the framework can allocate,
    already net of it). The peak (backward) bar's high is the fit peak: live 48,731,391,488
    (the two 32 MiB cuBLAS workspaces among the live tensors) + fragmentation 0.09 ×
    (48,731,391,488 − steady 12,112,716,288) = 3,295,680,768 + NCCL 2,000,000,000 =
    54,027,072,256 B; its low is 46,888,676,454 + 0.05 × (46,888,676,454 −
    12,112,716,288) = 1,738,798,008 + 500,000,000. The rest of reserved rides over each
    bar as its releasable cache (FSDP2's stream pools, engine/allocator/fsdp2_pools.py:
    1.55–1.74 × the all-gather working set 2,537,578,496 B, plus the reduce-scatter
    pool's 4,015,130,624 B of freed sharded gradients — at the loss's backward, where the
    backward bar peaks; 0 to it in the other phases), so bar + cache = reserved phase +
    outside. In the steady phase the model states are live: weights 4,015,130,624 B,
    optimizer 2 × 4,015,130,624 + 148,992 = 8,030,410,240 B, no gradients (set to None
    after the step) and no fragmentation (nothing transient)."""
    plan = default_plan()
    est = estimate(plan)
    st = est.heaviest
    hbm = panels(plan, est)[0]
    outside = sum(r.high for r in st.rows if r.id == "hbm.runtime.nccl")
    assert outside == 2_000_000_000
    for bar, ph in zip(hbm.bars, PHASES, strict=True):
        assert bar.reserved_high == st.reserved_phases[ph].high + outside
        ag, rs = 2_537_578_496, 4_015_130_624
        low_rs = rs if ph == "backward" else 0
        assert bar.cache == (int(ag * 1.55) + low_rs, int(ag * 1.74) + rs)
        assert not any(s.group == "allocator" for s in bar.segments)
    peak_bar = next(b for b in hbm.bars if b.highlight)
    assert (peak_bar.low, peak_bar.high) == (est.fit_peak.low, est.fit_peak.high)
    assert peak_bar.high == 48_731_391_488 + 3_295_680_768 + 2_000_000_000 == 54_027_072_256
    assert peak_bar.low == 46_888_676_454 + 1_738_798_008 + 500_000_000
    frag = {s.group: (s.low, s.high) for s in peak_bar.segments}[FRAGMENTATION_GROUP]
    assert frag == (1_738_798_008, 3_295_680_768)
    steady = dict((s.group, s.low) for s in hbm.bars[0].segments)
    assert steady["weights"] == 4_015_130_624
    assert steady["optimizer"] == 8_030_410_240
    assert "gradients" not in steady and FRAGMENTATION_GROUP not in steady
    assert sum(b.highlight for b in hbm.bars) == 1


def test_stage_bars_are_each_stages_fit_peak() -> None:
    """PP 2: each stage's bar at its own peak phase tops at that stage's fit peak
    (engine/ledger/stage_estimate.py StageTotals.fit_peak), its cache reaches the stage's
    reserved peak plus the memory outside PyTorch; the heaviest stage is marked."""
    plan = with_values(default_plan(), {"parallelism.pp": 2, "parallelism.dp": 4})
    est = estimate(plan)
    bars = stage_bars(plan, est)
    assert len(bars) == 2
    for bar, stage in zip(bars, est.stages, strict=True):
        assert (bar.low, bar.high) == (stage.totals.fit_peak.low, stage.totals.fit_peak.high)
        outside = sum(
            r.high for r in stage.rows if r.state == "runtime" and r.role != "cuda_context"
        )
        assert bar.reserved_high == stage.reserved_peak.high + outside
        assert bar.highlight == (stage.stage == est.heaviest_stage)


def test_the_fraction_reserve_model_has_no_releasable_cache() -> None:
    """runtime.reserve_model fraction counts the whole reserve toward fit
    (engine/allocator/reserve.py stuck_extra returns reserved_extra): the peak bar is
    the fit peak and nothing is drawn as releasable."""
    plan = with_value(default_plan(), "runtime.reserve_model", "fraction")
    est = estimate(plan)
    bars = panels(plan, est)[0].bars
    peak_bar = next(b for b in bars if b.highlight)
    assert peak_bar.high == est.fit_peak.high
    assert all(b.cache == (0, 0) for b in bars)


def _host_row(phases: frozenset[Phase], low: int, high: int, rid: str) -> Row:
    return make_row(
        id=rid,
        label="x",
        state="optimizer",
        location="host",
        kind="persistent",
        group="offload",
        low=low,
        high=high,
        formula="",
        source="user-input",
        scope="node",
        phases=phases,
    )


def test_host_panel_per_rank_share_and_per_node() -> None:
    """8 ranks per node. Node rows: 80–160 GB live in every phase, 16 GB only at the
    checkpoint and 40 GB only in the optimizer step. The node bar stacks the rows of the
    node's largest phase (optimizer: 120–200 GB, against checkpoint's 96–176 GB); the
    rank share is that ÷ 8 = 15–25 GB. Capacities 2 TiB / 8 = 274,877,906,944 B and
    2 TiB."""
    plan = default_plan()
    est = estimate(plan)
    rows = (
        _host_row(ALL_PHASES, 80 * 10**9, 160 * 10**9, "host.a"),
        _host_row(frozenset({"checkpoint"}), 16 * 10**9, 16 * 10**9, "host.b"),
        _host_row(frozenset({"optimizer"}), 40 * 10**9, 40 * 10**9, "host.c"),
    )
    est = dataclasses.replace(est, nodes=dataclasses.replace(est.nodes, host=rows))
    host = panels(plan, est)[1]
    share, node = host.bars
    assert (node.low, node.high) == (120 * 10**9, 200 * 10**9)
    assert (share.low, share.high) == (15 * 10**9, 25 * 10**9)
    assert share.capacity == 274_877_906_944 and node.capacity == 2 * 2**40
    assert stack([]) == ()


def test_hardware_presets_apply_cleanly() -> None:
    """Every preset yields a valid plan; node presets without a known RAM figure leave
    the user's value alone instead of inventing one."""
    for acc in hardware_presets.accelerators():
        assert acc.usable_source and acc.hbm_bytes > 0 and acc.usable_hbm_bytes > 0
        with_values(default_plan(), hardware_presets.accelerator_changes(acc.key))
    for node in hardware_presets.nodes():
        plan = with_values(default_plan(), hardware_presets.node_changes(node.key))
        if node.host_ram_bytes_per_node is None:
            assert (
                plan.hardware.host_ram_bytes_per_node
                == default_plan().hardware.host_ram_bytes_per_node
            )
    h100 = hardware_presets.accelerator("h100-sxm-80gb")
    assert h100.usable_hbm_bytes == default_plan().hardware.usable_hbm_bytes
    with pytest.raises(KeyError, match="unknown accelerator"):
        hardware_presets.accelerator("tpu-v9")
