"""torchtitan's per-layer RoPE caches (``hbm.buffers.rope_cache``), hand-derived.

torchtitan 0.3.0 builds one RoPE module per attention module
(``models/common/attention.py``: ``self.rope = config.rope.build()``), each with its own
``cache`` buffer (``models/common/rope.py`` ``RoPE.__init__``) of ``training.seq_len``
positions (``models/common/decoder.py`` ``Decoder.Config.update_from_config``):

- Llama 3 (``ComplexRoPE``): (S, d/2) complex64 = S·d·4 = 8192·128·4 = 4,194,304 B a
  layer; 32 layers: 134,217,728 B;
- Qwen3 (``CosSinRoPE``, ``cat([cos, sin], -1)`` of two (S, d) fp32): S·d·8 =
  8192·128·8 = 8,388,608 B a layer; 36 layers: 301,989,888 B.

The traced CI slice (``tests/trace/test_titan_grid.py``) measures them as the trace's
``buffers``: 2 layers × 512 positions × 128 × 4 = 524,288 B.
"""

from __future__ import annotations

from engine.estimate import estimate
from engine.ledger.row import Row
from engine.plan import with_values
from engine.presets import plan_for_model_preset
from tests.engine.ledger.test_torchtitan_profile import CASE, rows_of, titan


def _per_layer(**changes: object) -> dict[str, Row]:
    """The shared case as torchtitan 0.3.0 builds it (the case itself pins the Dec-2024
    code's one freqs_cis)."""
    return rows_of(titan(runtime__rope_cache="auto", **changes))


def test_llama3_complex_cache_per_layer() -> None:
    row = _per_layer()["hbm.buffers.rope_cache"]
    assert row.low == row.high == 32 * 8192 * 128 * 4 == 134_217_728
    assert row.state == "buffers" and row.kind == "persistent"
    assert {"steady", "forward", "backward.start", "optimizer"} <= row.moments


def test_qwen3_cos_sin_cache_is_twice_as_wide() -> None:
    plan = with_values(plan_for_model_preset("qwen3-8b"), {**CASE, "runtime.rope_cache": "auto"})
    row = {r.id: r for r in estimate(plan).heaviest.rows}["hbm.buffers.rope_cache"]
    assert row.low == 36 * 8192 * 128 * 8 == 301_989_888


def test_the_cache_follows_the_sequence_not_the_micro_batch() -> None:
    """The cache has ``training.seq_len`` positions whatever the micro-batch."""
    one = _per_layer(batch__micro_batch=1)["hbm.buffers.rope_cache"].low
    assert one == _per_layer()["hbm.buffers.rope_cache"].low
    short = _per_layer(batch__seq_len=2048)["hbm.buffers.rope_cache"].low
    assert short == 32 * 2048 * 128 * 4 == 33_554_432


def test_a_pipeline_stage_holds_its_own_layers_caches() -> None:
    """PP 2: each stage builds only its 16 attention modules, so 16 caches."""
    plan = titan(parallelism__pp=2, parallelism__dp=4, runtime__rope_cache="auto")
    est = estimate(plan)
    for stage in est.stages:
        row = {r.id: r for r in stage.rows}["hbm.buffers.rope_cache"]
        assert row.low == 16 * 8192 * 128 * 4


def test_the_dec_2024_code_kept_one_freqs_cis() -> None:
    """``per_model`` (torchtitan ``models/llama/model.py`` ``Transformer.__init__`` at
    9dec370: ``precompute_freqs_cis(dim // n_heads, max_seq_len * 2, theta)``): one
    complex64 (2·S, d/2) buffer, 2 × 8192 × 64 × 8 = 8,388,608 B, whatever the layers."""
    row = rows_of(titan())["hbm.buffers.rope_cache"]
    assert row.low == 2 * 8192 * 64 * 8 == 8_388_608


def test_only_torchtitan_builds_them() -> None:
    """transformers' rotary keeps one ``inv_freq`` per model (``hbm.buffers.rotary``)."""
    plain = rows_of(titan(stack__name="pytorch"))
    assert "hbm.buffers.rope_cache" not in plain
