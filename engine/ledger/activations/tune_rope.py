"""torchtune's RoPE cache (``hbm.buffers.rope_cache`` under ``runtime.rope_cache =
torchtune``): one module for the whole model, its cache sized to the model's
``max_seq_len``, not to the batch.

Why its own row: transformers' rotary keeps only ``inv_freq`` (``hbm.buffers.rotary``)
and torchtitan's caches follow ``training.seq_len`` (:mod:`titan_buffers`), but
torchtune's builders (``torchtune/models/llama3_1/_component_builders.py`` ``llama3_1``,
torchtune 1814feb, Nov 2024) build one ``Llama3ScaledRoPE(dim=head_dim,
max_seq_len=max_seq_len)`` before the layer loop and hand the same module to every
``MultiHeadAttention`` (``pos_embeddings=rope``), so its buffers exist once. Its
``rope_init`` registers (``torchtune/models/llama3_1/_position_embeddings.py``):

- ``theta``: the d/2 fp32 frequencies (``torch.arange(...).float()``, scaled in fp32);
- ``cache``: ``build_rope_cache(self.max_seq_len)`` stacks ``cos`` and ``sin`` of the
  fp32 ``idx_theta`` on a last axis: ``[max_seq_len, d // 2, 2]`` fp32, that is
  max_seq_len · d · 4 B — 131,072 · 128 · 4 = 64 MiB for Llama-3.x (``llama3_2_3b``,
  ``llama3_1_8b`` / ``70b`` pass ``max_seq_len=131072``), 4,096 · 128 · 4 = 2 MiB for
  Llama-2 (``RotaryPositionalEmbeddings``, ``torchtune/modules/position_embeddings.py``,
  the same two buffers).

The builders' ``max_seq_len`` is the model's context (the architecture's
``max_position``), whatever the tokenizer's ``max_seq_len`` truncates the batch to. Both
buffers are non-persistent and not parameters: FSDP2 does not shard them and the recipes'
``rope_init`` after loading builds them in fp32 on every rank, so every rank holds both
for the whole step.
"""

from __future__ import annotations

from collections.abc import Callable

from engine.ledger.activations.geometry import FP32, Geometry, geometry
from engine.ledger.activations.hf import rotary_dim
from engine.ledger.activations.varying import Fixed, held_buffer
from engine.plan import Plan
from engine.units import fmt_count, round_up

SOURCE = "torchtune-rope-cache"


def tune_rope_bytes(max_positions: int, dim: int, granularity: int) -> tuple[int, int]:
    """(cache, theta) bytes, each rounded to the allocator's ``granularity``:
    ``[max_positions, dim // 2, 2]`` fp32 and ``[dim // 2]`` fp32."""
    cache = round_up(max_positions * (dim // 2) * 2 * FP32, granularity)
    return cache, round_up((dim // 2) * FP32, granularity)


def tune_rope_at(plan: Plan) -> Callable[[Geometry, int], list[Fixed]] | None:
    """The stage's one torchtune RoPE module's buffers (none for a stage without layers,
    or a model without rotary positions)."""
    arch = plan.model.architecture
    if arch.position != "rotary":
        return None
    dim = rotary_dim(arch, geometry(plan))
    positions = arch.max_position

    def at(g: Geometry, n_layers: int) -> list[Fixed]:
        if n_layers == 0:
            return []
        cache, theta = tune_rope_bytes(positions, dim, g.granularity)
        n = cache + theta
        part = held_buffer(
            id="hbm.buffers.rope_cache",
            label="RoPE cache, one module shared by every layer (max_seq_len positions)",
            n=n,
            formula=lambda: (
                f"cache fp32 [{positions}, {dim // 2}, 2]·4 = {fmt_count(cache)} B + theta "
                f"fp32 {dim // 2}·4 = {fmt_count(theta)} B (each rounded to "
                f"{g.granularity}) = {fmt_count(n)} B"
            ),
            source=SOURCE,
        )
        return [part]

    return at
