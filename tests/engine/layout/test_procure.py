"""Procurement shapes: a single GPU, a partial node, whole nodes (engine/layout/point.py);
no proposal the plan's stack has no recipe for; the CP token rule worded as a preference."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from engine.layout.counts import gpu_counts
from engine.layout.point import partial_shapes, procurement, shape_words
from engine.layout.shapes import enumerate_layouts
from engine.legality.stack import adapter_tp_words
from engine.plan import default_plan, with_values


def test_shapes_by_hand() -> None:
    """Node of 8: 1 → 1 (single GPU), 3 → 4 (partial node of the sizes 1, 2, 4), 5 → 8
    (one node), 12 → 16 (two nodes); GPU rounding pays the ranks; a node of 6 sells 1, 2,
    4 and 6."""
    assert partial_shapes(8) == (1, 2, 4) and partial_shapes(6) == (1, 2, 4)
    assert [procurement(w, 8, "node") for w in (1, 2, 3, 4, 5, 8, 9, 12, 16)] == [
        1,
        2,
        4,
        4,
        8,
        8,
        16,
        16,
        16,
    ]
    assert procurement(3, 8, "gpu") == 3 and procurement(5, 6, "node") == 6
    assert shape_words(1, 8, "node").startswith("1 GPU: a single GPU")
    assert shape_words(4, 8, "node").startswith("4 GPUs: a partial node (4 of 8 per node")
    assert shape_words(16, 8, "node") == "16 GPUs = 2 nodes × 8 (rounded to whole nodes)"


@given(st.integers(1, 64), st.integers(1, 200), st.sampled_from(["node", "gpu"]))
def test_cost_is_monotone_and_covers_the_ranks(g: int, w: int, rounding: str) -> None:
    """The search bisects on the cost (engine/layout/minimum.py search_growing): it must
    never fall as ranks grow, and it always pays for every rank."""
    assert procurement(w, g, rounding) >= w
    assert procurement(w + 1, g, rounding) >= procurement(w, g, rounding)


def test_a_one_gpu_qlora_plan_buys_one_gpu() -> None:
    """Llama-3.1-8B QLoRA (the default plan with method.kind qlora, stack hf_trainer by
    auto): a 4-bit base of ~4.5 GB and adapters fit one H100, so the purchase is a single
    GPU — not "1 node × 8 GPUs, 7 idle"."""
    plan = with_values(default_plan(), {"method.kind": "qlora", "parallelism.dp": 1})
    c = gpu_counts(plan, max_gpus=64)
    assert c.first_layout.gpus == 1
    assert "procure 1 GPU: a single GPU" in c.first_layout.reason
    assert "idle" not in c.first_layout.reason
    assert c.shape.startswith("1 GPU: a single GPU")


def test_hf_tp_with_adapters_is_not_proposed() -> None:
    """HF Trainer TP (transformers tp_plan) with peft adapters or a 4-bit base has no
    documented recipe: every TP 2 layout of 2 GPUs is rejected with that reason; full
    fine-tuning keeps it."""
    for kind in ("lora", "qlora"):
        plan = with_values(default_plan(), {"method.kind": kind, "stack.name": "hf_trainer"})
        lat = enumerate_layouts(plan, 2)
        assert not any(lay.tp == 2 for lay in lat.legal)
        r = next(x for x in lat.rejected if x.layout.tp == 2)
        assert any("is not a documented recipe" in why for why in r.reasons)
    assert adapter_tp_words("hf_trainer", "full", 2) == ()
    assert adapter_tp_words("megatron_core", "lora", 2) == ()


def test_the_cp_token_rule_reads_as_a_preference() -> None:
    """CP 8 over 4,096 tokens leaves 512 per rank: not preferred (speed), and it says it
    runs; CP 2 (2,048 per rank) is not judged by it."""
    plan = with_values(default_plan(), {"batch.seq_len": 4096})
    lat = enumerate_layouts(plan, 8)
    r = next(x for x in lat.rejected if x.layout.cp == 8)
    words = next(why for why in r.reasons if "tokens per rank" in why)
    assert words.startswith("not preferred: CP 8 leaves 512 tokens per rank")
    assert "it runs" in words
