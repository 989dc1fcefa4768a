"""Float8 training (engine/ledger/peaks/float8.py), following torchao 0.9+
torchao/float8/float8_linear.py ``matmul_with_hp_or_float8_args``: the 16-bit input and
weight are saved (no saved-activation change); one linear's weight is cast to e4m3 at a
time; dynamic scaling registers no amax/scale buffers (``Float8Linear.create_buffers``)."""

from __future__ import annotations

from engine.estimate import estimate
from engine.plan import Plan, default_plan, with_values

LLAMA_8B_FSDP = {
    "parallelism.strategy": "fsdp2",
    "parallelism.dp": 8,
    "batch.seq_len": 2048,
}


def _rows(plan: Plan) -> dict[str, tuple[int, int, frozenset[str]]]:
    return {r.id: (r.low, r.high, frozenset(r.phases)) for r in estimate(plan).heaviest.rows}


def test_weight_cast_is_the_largest_decoder_linear_at_one_byte() -> None:
    """The default plan is Llama-3-8B-shaped (h 4096, i 14336): the largest decoder linear
    is an MLP projection, 14336 × 4096 = 58,720,256 elements → 58,720,256 B in fp8 (a
    multiple of 512: no rounding); live in forward and the layers' backward."""
    plan = with_values(default_plan(), {**LLAMA_8B_FSDP, "method.precision.float8": "tensorwise"})
    low, high, phases = _rows(plan)["hbm.float8.weight_cast"]
    assert low == high == 14336 * 4096
    assert phases == {"forward", "backward"}


def test_tensor_parallel_splits_the_cast_and_fp8_all_gather_drops_forwards() -> None:
    """TP 4 splits the MLP weight: 14336/4 × 4096 = 14,680,064 B; with fp8 all-gather the
    gathered weight is already fp8, so only backward's recast remains."""
    plan = with_values(
        default_plan(),
        {
            **LLAMA_8B_FSDP,
            "parallelism.dp": 2,
            "parallelism.tp": 4,
            "method.precision.float8": "rowwise",
            "method.precision.float8_all_gather": True,
        },
    )
    low, _, phases = _rows(plan)["hbm.float8.weight_cast"]
    assert low == 14336 // 4 * 4096
    assert phases == {"backward"}


def test_saved_activations_and_every_other_row_stay_as_without_float8() -> None:
    """input_hp and weight_hp_t are what a 16-bit linear saves: nothing else changes."""
    base = with_values(default_plan(), LLAMA_8B_FSDP)
    f8 = with_values(base, {"method.precision.float8": "tensorwise"})
    without = _rows(base)
    with_f8 = _rows(f8)
    assert "hbm.float8.weight_cast" not in without
    del with_f8["hbm.float8.weight_cast"]
    reserve = "hbm.runtime.allocator_reserve"  # a share of the allocated peak
    assert {k: v for k, v in with_f8.items() if k != reserve} == {
        k: v for k, v in without.items() if k != reserve
    }


def test_knob_fields_are_disabled_where_nothing_reads_them() -> None:
    """engine/stacks/applicability.py: fp8 all-gather needs Float8 under FSDP2; the
    bitsandbytes version only moves QLoRA rows; recompute modules need Megatron's
    selective recompute."""
    from engine.stacks.applicability import inapplicable

    plain = inapplicable(with_values(default_plan(), LLAMA_8B_FSDP))
    for path in (
        "method.precision.float8_all_gather",
        "runtime.bitsandbytes_version",
        "method.recompute.modules",
    ):
        assert path in plain
    f8 = inapplicable(
        with_values(default_plan(), {**LLAMA_8B_FSDP, "method.precision.float8": "tensorwise"})
    )
    assert "method.precision.float8_all_gather" not in f8
    assert "method.optimizer.paged" not in f8  # AdamW: bitsandbytes pages it
