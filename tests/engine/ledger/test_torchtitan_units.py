"""torchtitan 0.3's fused wqkv under per-op SAC, and its FSDP2 head / embedding units.

Llama-3.1-8B on FSDP2 × 8, s 8192, micro-batch 2 (``test_torchtitan_profile.py``'s
case, T = 16,384 tokens, bf16 activations; every term a multiple of 512 B).

- **fused wqkv** (``torchtitan/models/llama3/__init__.py`` ``_build_llama3_layers``:
  every 0.3 flavor passes ``fuse_qkv=True``; ``models/common/attention.py``
  ``qkv = self.wqkv(x)``): the block's mms run wqkv, wo, w1, w3, w2, so
  ``SelectiveAC``'s odd ``forward_mm_count`` caches wqkv (q + 2·kv = 4096 + 2·1024
  wide, 12,288 B a token), w1 (28,672) and w2 (8192); with the block input 8192, the
  attention output 8192 and fp32 logsumexp 128:
  8192 + 12,288 + 8192 + 128 + 28,672 + 8192 = 65,664 B a token (the traced grid's
  65,795 adds flex attention's fp32 max scores, 32·4, not counted).
- **head and embedding units** (``torchtitan/distributed/fsdp.py``
  ``apply_fsdp_to_decoder``): ``fully_shard([norm, lm_head])`` not resharded after
  forward: 128,256 × 4096 × 2 + 4096 × 2 = 1,050,681,344 B, gathered in forward and at
  ``backward.start``; ``fully_shard(tok_embeddings)`` resharded after forward:
  128,256 × 4096 × 2 = 1,050,673,152 B, gathered again only for its own backward, the
  last (``backward.end``). The forward's last all-gather is the head's, so no layer's
  prefetch buffer waits through the loss: the buffer row is not live in forward nor at
  ``backward.start``.
"""

from __future__ import annotations

from engine.ledger.activations.stage_layers import stage_layers
from engine.stacks.defaults import resolved
from tests.engine.ledger.test_torchtitan_profile import SAC_PER_TOKEN, T, rows_of, titan

FUSED_SAC_PER_TOKEN = 8192 + 12_288 + 8192 + 128 + 28_672 + 8192
HEAD_UNIT = 128_256 * 4096 * 2 + 4096 * 2
EMBEDDING_UNIT = 128_256 * 4096 * 2


def test_fused_wqkv_caches_the_whole_qkv_output_under_per_op_sac() -> None:
    plan = resolved(titan(model__architecture__fused_qkv=True))
    sl = stage_layers(plan, 0)
    assert FUSED_SAC_PER_TOKEN == 65_664 == SAC_PER_TOKEN + 2048
    assert sl.ckpt_bytes == T * FUSED_SAC_PER_TOKEN == 1_075_838_976


def test_the_head_unit_is_gathered_until_its_post_backward() -> None:
    rows = rows_of(titan())
    head = rows["hbm.gathered.root"]
    assert head.low == head.high == HEAD_UNIT == 1_050_681_344
    assert head.moments == {"forward", "backward.start"}


def test_the_embedding_unit_is_gathered_only_for_its_backward() -> None:
    """The eager loss: the first layer's pre-backward prefetches the embedding (the
    chunked loss gathers it later: ``test_titan_prefetch.py``)."""
    emb = rows_of(titan(runtime__loss_impl="eager"))["hbm.gathered.embedding"]
    assert emb.low == emb.high == EMBEDDING_UNIT == 1_050_673_152
    assert emb.moments == {"backward.end"}


def test_no_layer_prefetch_buffer_waits_through_the_loss() -> None:
    buf = rows_of(titan(runtime__loss_impl="eager"))["hbm.gathered.all_gather_buffer"]
    assert "forward" not in buf.moments and "backward.start" not in buf.moments
    assert "backward.layers" in buf.moments


def test_a_plain_fsdp2_script_keeps_one_root_unit() -> None:
    """Under the pytorch stack the root unit (embedding, norm, head) stays gathered
    from forward through backward, as before: 2 × 1,050,673,152 + 8192 B."""
    rows = rows_of(titan(stack__name="pytorch"))
    assert rows["hbm.gathered.root"].low == EMBEDDING_UNIT + HEAD_UNIT
    assert "hbm.gathered.embedding" not in rows


def test_the_chunked_loss_scatter_output_is_the_head_units_fp32_shard() -> None:
    """The chunked loss reduce-scatters lm_head's fp32 gradient at its last chunk
    (``FSDPParamGroup.post_backward`` → ``foreach_reduce``): the output is this rank's
    fp32 shard of the head unit, (128,256 ÷ 8 = 16,032 rows × 4096 + 4096 ÷ 8 = 512)
    × 4 = 262,670,336 B, live in forward; none under the eager loss."""
    rows = rows_of(titan(runtime__loss_impl="chunked"))
    out = rows["hbm.gathered.head_scatter_output"]
    assert out.low == (16_032 * 4096 + 512) * 4 == 262_670_336
    assert out.phases == {"forward"}
    assert "hbm.gathered.head_scatter_output" not in rows_of(titan(runtime__loss_impl="eager"))


def test_the_head_units_second_gather_adds_what_the_loss_does_not_cover() -> None:
    """``backward.start`` is the larger of the eager loss's backward and the head unit's
    second gather for ``norm``'s backward (``FSDPParamGroup.post_backward`` resharded it
    first): all-gather 1,050,681,344 + the first scatter's fp32 input (128,256·4096 +
    4096)·4 = 2,101,362,688, less the loss's 3·T·V·4. At s 8192 × 2 the loss's
    3 × 16,384·128,256·4 = 25,216,155,648 covers it: no row. At s 512 × 1:
    3 × 512·128,256·4 = 788,004,864, so 1,050,681,344 + 2,101,362,688 − 788,004,864 =
    2,364,039,168 B. Chunked (scattered in forward): the all-gather alone."""
    assert "hbm.gathered.head_regather" not in rows_of(titan(runtime__loss_impl="eager"))
    short = titan(runtime__loss_impl="eager", batch__seq_len=512, batch__micro_batch=1)
    row = rows_of(short)["hbm.gathered.head_regather"]
    assert row.low == 1_050_681_344 + 2_101_362_688 - 788_004_864 == 2_364_039_168
    assert row.moments == {"backward.start"}
    chunked = titan(runtime__loss_impl="chunked", batch__seq_len=512, batch__micro_batch=1)
    assert rows_of(chunked)["hbm.gathered.head_regather"].low == HEAD_UNIT


def test_qwen3_q_and_k_norms_keep_their_inputs_and_rstd() -> None:
    """torchtitan's qwen3 block (``models/qwen3``: ``q_norm`` / ``k_norm`` RMSNorm over
    head_dim 128, fused on CUDA): per token q 32·128·2 = 8192 + rstd 32·4 = 128, k
    8·128·2 = 2048 + 8·4 = 32: 10,400 B more than the same block without them (the
    traced Qwen3-8B layer keeps 162,222 B a token with none AC, the ledger's band
    158,846–170,192)."""
    from engine.ledger.activations import torchtitan as tt
    from engine.ledger.activations.geometry import Geometry, terms_bytes

    g = Geometry(
        micro_batch=1, seq=1, hidden=4096, heads=32, kv_heads=8, head_dim=128, inter=12288,
        vocab=151936, tp=1, sp=False, compute_bytes=2, embed_bytes=2, autocast=True,
        granularity=1,
    )  # fmt: skip
    extra = terms_bytes(tt.layer_terms(g, True), g) - terms_bytes(tt.layer_terms(g), g)
    assert extra == 8192 + 128 + 2048 + 32 == 10_400
