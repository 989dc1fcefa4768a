"""transformers' per-layer rotary cos / sin caches (``hbm.buffers.rope_cache`` under the
hf-transformers profile), kept by the releases that still built them.

Why a row of its own: today's transformers computes cos / sin from ``inv_freq`` at each
forward (``hbm.buffers.rotary`` holds only the frequencies), but older releases gave every
attention layer its own rotary module with two non-persistent caches sized to the
model's context, not to the batch. Read in the released wheels' modeling files:

- llama, transformers 4.37.2 ``LlamaRotaryEmbedding.__init__`` → ``_set_cos_sin_cache(
  seq_len=max_position_embeddings, dtype=torch.get_default_dtype())``:
  ``emb = torch.cat((freqs, freqs), dim=-1)`` of ``(max_position_embeddings, dim)``,
  ``register_buffer("cos_cached", emb.cos().to(dtype), persistent=False)`` and
  ``sin_cached`` alike; 4.38.2, 4.39.3 and 4.40.0 register the same two tensors as
  ``_cos_cached`` / ``_sin_cached`` ("For BC we register cos and sin cached",
  ``emb.cos().to(torch.get_default_dtype())``); 4.41.0 registers neither;
- mistral, ``MistralRotaryEmbedding`` 4.37.2 – 4.41.0: the 4.37 llama code
  (``_set_cos_sin_cache``); 4.42.0 registers neither.

Each ``LlamaAttention`` / ``MistralAttention`` builds its own (``_init_rope``:
``self.rotary_emb = LlamaRotaryEmbedding(self.head_dim, max_position_embeddings=...)``),
so a stage holds ``2 × n_layers`` tensors of ``max_position × head_dim`` elements in the
default dtype at construction: ``from_pretrained(torch_dtype=...)`` sets it to the model's
parameter dtype while the modules are built
(``modeling_utils.PreTrainedModel._set_default_torch_dtype``),
so the plan's parameter dtype (bf16 under a 16-bit policy, fp32 where the parameters are).
They are buffers, not parameters: FSDP1's flat parameters and ZeRO-3's partitions leave
them whole and TP does not split a head's width, so every rank holds its stage's.
Other families' caches (qwen2 and mixtral still build them at 4.43.0) are not modelled
here: their last release with the caches was not read.
"""

from __future__ import annotations

from collections.abc import Callable

from engine.ledger.activations.geometry import Geometry, geometry
from engine.ledger.activations.hf import rotary_dim
from engine.ledger.activations.library_versions import version_tuple
from engine.ledger.activations.varying import Fixed, held_buffer
from engine.ledger.precision import resolve_formats
from engine.plan import Plan
from engine.units import fmt_count, round_up

SOURCE = "hf-rotary-cos-sin-cache"

CACHES_UNTIL: dict[str, tuple[int, int, int]] = {"llama": (4, 41, 0), "mistral": (4, 42, 0)}
"""Per family, the first transformers release whose rotary module no longer registers
the cos / sin caches (read: llama 4.40.0 has them, 4.41.0 not; mistral 4.41.0 / 4.42.0)."""


def keeps_rope_caches(family: str, transformers_version: str) -> bool:
    """Whether this family's modeling code at this transformers release registers the
    per-layer cos / sin caches."""
    until = CACHES_UNTIL.get(family)
    return until is not None and version_tuple(transformers_version) < until


def cache_bytes_per_layer(max_position: int, dim: int, dtype_bytes: int, gran: int) -> int:
    """One layer's cos and sin caches: 2 × ``max_position × dim`` elements, each tensor
    rounded to the allocator's ``gran``."""
    return 2 * round_up(max_position * dim * dtype_bytes, gran)


def hf_rope_caches_at(plan: Plan) -> Callable[[Geometry, int], list[Fixed]] | None:
    """The stage's per-layer cos / sin caches for ``n_layers`` layers at a micro-batch's
    geometry (its granularity only); None where the plan's transformers release and
    family build no such caches, or the model has no rotary positions."""
    arch, rt = plan.model.architecture, plan.runtime
    if arch.position != "rotary" or not keeps_rope_caches(arch.family, rt.transformers_version):
        return None
    dim = rotary_dim(arch, geometry(plan))
    positions = arch.max_position
    dtype_bytes = resolve_formats(plan.method.precision).param_bytes
    version = rt.transformers_version

    def at(g: Geometry, n_layers: int) -> list[Fixed]:
        if n_layers == 0:
            return []
        one = cache_bytes_per_layer(positions, dim, dtype_bytes, g.granularity)
        n = n_layers * one
        part = held_buffer(
            id="hbm.buffers.rope_cache",
            label=f"Rotary cos / sin caches, one pair per attention layer ({n_layers})",
            n=n,
            formula=lambda: (
                f"transformers {version}: {n_layers} layers × 2 × {positions} positions × "
                f"{dim} × {dtype_bytes} B (each tensor rounded to {g.granularity}) = "
                f"{n_layers} × {fmt_count(one)} B = {fmt_count(n)} B"
            ),
            source=SOURCE,
        )
        return [part]

    return at
