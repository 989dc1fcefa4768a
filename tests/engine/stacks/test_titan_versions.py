"""torchtitan defaults that follow ``runtime.torchtitan_version``: 0.3.0's llama3 / qwen3
code fuses q / k / v into ``wqkv`` and gives every attention layer its own RoPE cache
(``models/common/rope.py``); 0.2.0's ``models/llama3/model/model.py`` still builds
``wq`` / ``wk`` / ``wv`` and registers one ``freqs_cis`` buffer on the model."""

from __future__ import annotations

import pytest

from engine.plan import default_plan, with_values
from engine.stacks.defaults import resolved
from engine.stacks.titan_versions import titan_at_least


@pytest.mark.parametrize(
    ("version", "fusion", "rope"),
    [
        ("0.3.0", "fused", "per_layer"),
        ("0.3", "fused", "per_layer"),
        ("0.2.0", "as_model", "per_model"),
        ("0.0.2", "as_model", "per_model"),
    ],
)
def test_auto_follows_the_torchtitan_version(version: str, fusion: str, rope: str) -> None:
    plan = with_values(
        default_plan(),
        {
            "stack.name": "torchtitan",
            "parallelism.strategy": "fsdp2",
            "parallelism.dp": 8,
            "runtime.torchtitan_version": version,
        },
    )
    rt = resolved(plan).runtime
    assert (rt.qkv_fusion, rt.rope_cache) == (fusion, rope)


def test_version_order_reads_numbers_not_text() -> None:
    assert titan_at_least("0.10.0", (0, 3, 0))
    assert not titan_at_least("0.2.9", (0, 3, 0))
