"""A node preset sold whole (the DGX A100) makes procurement round to whole nodes even
below one node (engine/layout/point.py), and its figures are the datasheet's."""

from __future__ import annotations

from engine.layout.point import procurement, rounding_noun, shape_words
from engine.plan import default_plan, with_values
from engine.presets import node, node_changes


def test_dgx_a100_preset_figures() -> None:
    # NVIDIA DGX A100 datasheet: 8 × A100 80 GB, 2 TB RAM (read as 2 TiB = 2 × 2^40 B),
    # 15 TB NVMe (4 × 3.84 TB = 15.36e12 B), 8 × 200 Gb/s HDR IB = 25 GB/s per GPU.
    dgx = node("dgx-a100")
    assert dgx.accelerator == "a100-sxm-80gb"
    assert dgx.gpus_per_node == 8
    assert dgx.host_ram_bytes_per_node == 2 * 2**40
    assert dgx.nvme_bytes_per_node == 4 * 3_840_000_000_000
    assert dgx.inter_node_gbps == 200 / 8
    assert dgx.sold_whole and "datasheet" in dgx.source
    assert not node("single-gpu").sold_whole


def test_sold_whole_rounds_a_one_rank_job_to_a_node() -> None:
    # Partial shapes under "node" rounding: 1 → 1, 3 → 4; sold whole: both → 8; 9 → 16 either way.
    assert procurement(1, 8, "node") == 1
    assert procurement(3, 8, "node") == 4
    assert procurement(1, 8, "whole_node") == 8
    assert procurement(3, 8, "whole_node") == 8
    assert procurement(9, 8, "whole_node") == procurement(9, 8, "node") == 16
    assert "sold whole" in shape_words(8, 8, "whole_node")
    assert "partial" not in shape_words(8, 8, "whole_node")
    assert rounding_noun("whole_node") == "nodes (sold whole)"
    assert rounding_noun("node") == "nodes"


def test_applying_the_preset_sets_the_rounding() -> None:
    changes = node_changes("dgx-a100")
    plan = with_values(default_plan(), changes)
    assert plan.policy.rounding == "whole_node"
    assert plan.hardware.accelerator == "a100-sxm-80gb"
    assert plan.hardware.inter_node_gbps == 25.0
    # Every DGX is sold as one system (H100, H200, B200 as well as A100); a node
    # preset that is not a DGX leaves the rounding alone.
    for key in ("dgx-h100", "dgx-h200", "dgx-b200"):
        assert node_changes(key)["policy.rounding"] == "whole_node", key
        assert "sold as one 8-GPU system" in node(key).source
    assert "policy.rounding" not in node_changes("mi300x-platform")
    assert "policy.rounding" not in node_changes("single-gpu")
