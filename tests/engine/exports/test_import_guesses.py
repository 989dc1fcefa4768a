"""Values an importer has to guess are warned, never silent (issue 33), and Megatron's
documented ``--moe-layer-freq`` forms are read as Megatron reads them.

The forms and their meaning follow Megatron-LM's ``moe_freq_type``
(``megatron/training/arguments.py``: an int N, or a Python list expression with one 0/1
per layer) and ``get_gpt_decoder_block_spec`` (``megatron/core/models/gpt/
gpt_layer_specs.py``: for an int N, layer ``i`` is MoE when ``i % N == 0``). MemPlan's
MoE spec marks layer ``i`` MoE when ``i >= first_dense_layers`` and
``(i + 1) % layer_step == 0`` (``engine/models/spec.py``); the expected pairs below are
worked out by hand from those two rules.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from engine.exports.import_values import Sizes
from engine.exports.mlm_import import import_megatron
from engine.exports.mlm_pattern import PatternError, dense_and_step, moe_pattern
from engine.plan import default_plan
from tests.fuzz.run_imports import deadline

ARGS = "--hidden-size 1024 --num-attention-heads 16 --num-experts 8"


def _moe(freq: str, layers: int) -> tuple[int, int, tuple[str, ...]]:
    text = f"torchrun pretrain_gpt.py {ARGS} --num-layers {layers} --moe-layer-freq {freq}\n"
    got = import_megatron(text, default_plan())
    moe = got.plan.model.architecture.moe
    assert moe is not None
    return moe.first_dense_layers, moe.layer_step, got.warnings


@pytest.mark.parametrize(
    ("freq", "layers", "dense", "step"),
    [
        # DeepSeek-V3's 3 dense layers then 58 MoE: 0,0,0,1,…,1 → dense 3, every layer after
        ("'([0]*3+[1]*58)'", 61, 3, 1),
        ('"([0]*3+[1]*58)"', 61, 3, 1),
        ("[0]*3+[1]*58", 61, 3, 1),
        # 0,1,0,1,…: layers 1,3,…,47 are MoE, i.e. (i + 1) % 2 == 0 from layer 0
        ("'([0,1]*24)'", 48, 0, 2),
        ("'([0]+[1]*26)'", 27, 1, 1),
        ("[0,0,1,1]", 4, 2, 1),
        # an int 1: i % 1 == 0 for every layer
        ("1", 12, 0, 1),
    ],
)
def test_documented_moe_layer_freq_forms(freq: str, layers: int, dense: int, step: int) -> None:
    got_dense, got_step, warnings = _moe(freq, layers)
    assert (got_dense, got_step) == (dense, step)
    assert not any("moe-layer-freq" in w for w in warnings)


@pytest.mark.parametrize(
    ("freq", "layers", "moe_layers"),
    [
        # int 2 over 8 layers: Megatron makes layers 0, 2, 4, 6 MoE (i % 2 == 0); no
        # (dense, step) pair gives layer 0, so the same count (4) is kept, the last 4
        ("2", 8, 4),
        # "([1]*3+[0]*2)*2" = 1,1,1,0,0,1,1,1,0,0: 6 MoE layers in two runs
        ("'([1]*3+[0]*2)*2'", 10, 6),
    ],
)
def test_patterns_memplan_cannot_place_keep_the_count_and_warn(
    freq: str, layers: int, moe_layers: int
) -> None:
    dense, step, warnings = _moe(freq, layers)
    assert (dense, step) == (layers - moe_layers, 1)
    assert any(f"counted as {moe_layers} MoE layers" in w for w in warnings)


def test_ten_thousand_layers_are_read_in_linear_time() -> None:
    """The old reader tried every (dense, step) pair against the whole pattern: 99 s for
    10,000 layers. Bounded by the fuzz deadline, not timed."""
    with deadline(10):
        assert dense_and_step(moe_pattern("[" + ",".join(["1"] * 10_000) + "]", 10_000)) == (0, 1)
        assert dense_and_step(moe_pattern("+".join(["[1]"] * 10_000), 10_000)) == (0, 1)


@pytest.mark.parametrize(
    "bad",
    ["[2]", "[1]*999999999", "(" * 100 + "[1]" + ")" * 100, "[1]*[1]", "__import__('os')", "0"],
)
def test_bad_patterns_are_refused_not_evaluated(bad: str) -> None:
    with pytest.raises(PatternError):
        moe_pattern(bad, 4)


@given(st.lists(st.integers(0, 1), min_size=1, max_size=60))
def test_a_pair_found_marks_exactly_the_patterns_moe_layers(pattern: list[int]) -> None:
    found = dense_and_step(pattern)
    if found is not None:
        dense, step = found
        rebuilt = [int(i >= dense and (i + 1) % step == 0) for i in range(len(pattern))]
        assert rebuilt == pattern


def test_shell_variables_warn_and_the_scripts_own_assignments_are_filled() -> None:
    text = (
        f"torchrun pretrain_gpt.py {ARGS} --tensor-model-parallel-size ${{TP}} --num-layers $NL\n"
    )
    got = import_megatron(text, default_plan())
    assert got.plan.parallelism.tp == 1
    assert any(
        w.startswith("--tensor-model-parallel-size = '${TP}' is a shell variable")
        for w in got.warnings
    )
    assert any(w.startswith("--num-layers = '$NL' is a shell variable") for w in got.warnings)
    got = import_megatron("TP=4\nNL=8\n" + text, default_plan())
    assert got.plan.parallelism.tp == 4 and got.plan.model.architecture.layers == 8
    assert "TP=4 (the script's own assignment)" in got.resolutions


@pytest.mark.parametrize(
    ("raw", "why"),
    [
        ("${TP}", "is a shell variable MemPlan cannot expand"),
        ("$((2*4))", "is a shell variable MemPlan cannot expand"),
        ("2*4", "is an expression MemPlan does not evaluate"),
        (0, "is below 1"),
        (-3, "is below 1"),
        ("1e999", "is not a whole number"),
        (2.5, "is not a whole number"),
        (True, "is true/false, not a number"),
        ([4], "is a list, not a number"),
    ],
)
def test_a_size_that_is_not_usable_takes_the_default_with_a_warning(raw: object, why: str) -> None:
    sizes = Sizes()
    assert sizes.size("key", raw, 7, "the plan's") == 7
    assert sizes.warnings == [f"key = {raw!r} {why}: the plan's 7 used instead"]


def test_absent_is_quiet_and_numbers_in_text_are_read() -> None:
    sizes = Sizes()
    assert sizes.size("key", None, 7, "") == 7
    assert sizes.size("key", "16", 7, "") == 16 and sizes.size("key", 8.0, 7, "") == 8
    assert sizes.warnings == []
