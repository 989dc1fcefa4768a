"""torchtitan's RoPE caches (``hbm.buffers.rope_cache``): one per attention layer.

torchtitan 0.3.0 builds a RoPE module inside every attention module
(``torchtitan/models/common/attention.py``: ``self.rope = config.rope.build()``), and each
registers its own non-persistent ``cache`` buffer (``models/common/rope.py``
``RoPE.__init__``: ``register_buffer("cache", self._precompute_cache())``), sized to the
RoPE config's ``max_seq_len`` — which ``Decoder.Config.update_from_config`` sets to
``training.seq_len`` for every layer before the model is built
(``models/common/decoder.py``). So a stage holds, for the whole step, per layer:

- ``ComplexRoPE`` (llama3, deepseek_v3): ``(max_seq_len, dim / 2)`` complex64, that is
  S · d · 4 B;
- ``CosSinRoPE`` (qwen3): ``cat([cos, sin], -1)`` of ``(max_seq_len, dim)`` fp32 each,
  S · d · 8 B;

with d the rotary dimension (the head dim; MLA's rope dims). ``runtime.rope_cache =
per_model`` is the earlier llama code instead (torchtitan ``models/llama/model.py``
``Transformer.__init__`` at 9dec370, Dec 2024, and through 2025:
``register_buffer("freqs_cis", precompute_freqs_cis(dim // n_heads, max_seq_len * 2,
rope_theta))``): one complex64 buffer of 2·S positions on the model, 2·S·d·4 B. Buffers
are neither
sharded by FSDP2 nor cast by its ``MixedPrecisionPolicy``, and TP leaves them whole, so
every rank holds all of its stage's. They do not depend on the micro-batch, only on the
plan's sequence length.
"""

from __future__ import annotations

from collections.abc import Callable

from engine.ledger.activations.geometry import FP32, Geometry, geometry
from engine.ledger.activations.hf import rotary_dim
from engine.ledger.activations.hf_rope_cache import hf_rope_caches_at
from engine.ledger.activations.tune_rope import tune_rope_at
from engine.ledger.activations.varying import Fixed, held_buffer
from engine.plan import Plan
from engine.units import fmt_count, round_up

COS_SIN_FAMILIES = frozenset({"qwen3", "qwen3_moe"})
"""Families torchtitan builds with ``CosSinRoPE`` (fp32 cos and sin); the others with
``ComplexRoPE`` (complex64, half the width)."""


def rope_cache_bytes_per_position(family: str, dim: int) -> int:
    """One position's cache bytes: complex64 d/2 (= 4·d) or fp32 cos + sin (= 8·d)."""
    return 2 * dim * FP32 if family in COS_SIN_FAMILIES else (dim // 2) * 2 * FP32


def rope_caches_at(plan: Plan) -> Callable[[Geometry, int], list[Fixed]] | None:
    """The stage's RoPE caches for ``n_layers`` layers at a micro-batch's geometry
    (its granularity only); None where the plan is not torchtitan's or has no RoPE.
    ``runtime.rope_cache = torchtune`` is torchtune's one shared cache instead
    (:mod:`tune_rope`), under whichever profile; the hf-transformers profile's are the
    old transformers releases' per-layer cos / sin caches (:mod:`hf_rope_cache`)."""
    if plan.runtime.rope_cache == "torchtune":
        return tune_rope_at(plan)
    if plan.runtime.activation_profile == "hf-transformers":  # transformers < 4.41's caches
        return hf_rope_caches_at(plan)
    arch = plan.model.architecture
    if plan.runtime.activation_profile != "torchtitan" or arch.position != "rotary":
        return None
    per_model = plan.runtime.rope_cache == "per_model"
    seq = plan.batch.seq_len * (2 if per_model else 1)
    dim = rotary_dim(arch, geometry(plan))
    family = "llama" if per_model else arch.family  # freqs_cis is complex
    per_position = rope_cache_bytes_per_position(family, dim)
    kind = f"fp32 cos + sin 2·{dim}·4" if family in COS_SIN_FAMILIES else f"complex64 {dim}/2·8"

    def at(g: Geometry, n_layers: int) -> list[Fixed]:
        if n_layers == 0:
            return []
        copies = 1 if per_model else n_layers
        one = round_up(seq * per_position, g.granularity)
        n = copies * one
        part = held_buffer(
            id="hbm.buffers.rope_cache",
            label="RoPE cache, the model's freqs_cis (2 × seq_len positions)"
            if per_model
            else f"RoPE caches, one per attention layer ({n_layers})",
            n=n,
            formula=lambda: (
                f"{copies} × {seq} positions × {kind} = {copies} × {fmt_count(one)} B"
                f" (each rounded to {g.granularity}) = {fmt_count(n)} B"
            ),
            source="torchtitan-rope-cache",
        )
        return [part]

    return at
