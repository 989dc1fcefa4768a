"""Architecture spec → every parameter tensor, exact to the element.

Each tensor carries a *role* because later rules key on it: tensor parallelism splits
column-parallel roles on dim 0 and row-parallel roles on dim 1 (see ``roles.py``),
pipeline stages place layers by index, LoRA targets by role, expert parallelism divides
routed experts. Shapes follow PyTorch's ``nn.Linear`` convention ``(out_features,
in_features)``, which is also the dim 0 that FSDP2 chunks.

The family layouts live in ``layouts.py`` (names and order), ``attention.py`` and
``feedforward.py`` (blocks); this module assembles them, stamps the stored dtype, and
caches the whole inventory per spec (specs are frozen, hence hashable) for the callers
that walk every tensor (summaries, exports, traces). The ledger does not: it reads the
root tensors and one decoder layer per kind (:func:`root_tensors`, :func:`layer_tensors`),
which for DeepSeek-V3 is ~1,600 tensors instead of ~45,000.
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import lru_cache

from engine.models.layouts import family_layout, family_parts
from engine.models.spec import ArchitectureSpec
from engine.models.tensor import Role, Tensor, TensorDtype, TensorKind

__all__ = [
    "Role",
    "Tensor",
    "TensorKind",
    "build_inventory",
    "layer_tensors",
    "root_tensors",
    "total_params",
]

# Roles an FP8 block-quantised checkpoint keeps in 16-bit. DeepSeek-V3's files confirm it:
# their safetensors metadata (684,531,386,000 elements) equals the parameters plus one fp32
# scale per 128×128 block of exactly the 2-D weights not listed here (MTP's eh_proj is bf16).
_HIGH_PRECISION_ROLES = frozenset(
    {"embedding", "position_embedding", "lm_head", "mtp_embedding", "mtp_head", "router", "mtp"}
)


def stored_dtype(spec: ArchitectureSpec, t: Tensor) -> TensorDtype:
    if t.dtype == "fp32":  # explicitly full-precision in every published checkpoint
        return "fp32"
    if spec.stored_dtype != "fp8_e4m3":
        return spec.stored_dtype
    if t.kind == "weight" and len(t.shape) == 2 and t.role not in _HIGH_PRECISION_ROLES:
        return "fp8_e4m3"
    return "bf16"


def _stamped(spec: ArchitectureSpec, tensors: Iterable[Tensor]) -> tuple[Tensor, ...]:
    """``tensors`` with their stored dtype (:func:`stored_dtype`)."""
    out: list[Tensor] = []
    for t in tensors:
        dtype = stored_dtype(spec, t)
        if dtype != t.dtype:  # every field but the dtype, positionally (``replace`` is slow)
            t = Tensor(
                t.name,
                t.shape,
                t.role,
                t.kind,
                t.layer,
                dtype,
                t.stored_transposed,
                t.module,
                t.expert,
                t.stacked,
                t.keep_fp32,
                t.buffer,
            )
        out.append(t)
    return tuple(out)


@lru_cache(maxsize=64)
def build_inventory(spec: ArchitectureSpec) -> tuple[Tensor, ...]:
    """Every parameter tensor of the model, in checkpoint order (cached per spec)."""
    return _stamped(spec, family_layout(spec))


def root_tensors(spec: ArchitectureSpec) -> tuple[Tensor, ...]:
    """The tensors outside the decoder layers (embeddings, final norm, output layer, MTP
    modules), in checkpoint order: :func:`build_inventory`'s with no layer index, without
    building the layers."""
    head, _, tail = family_parts(spec)
    return _stamped(spec, (*head(spec), *tail(spec)))


def layer_tensors(spec: ArchitectureSpec, layer: int) -> tuple[Tensor, ...]:
    """Decoder layer ``layer``'s tensors, in checkpoint order: :func:`build_inventory`'s
    of that layer index, built alone — the ledger builds one layer per kind, not a
    256-expert model's ~45,000 layer tensors."""
    _, one, _ = family_parts(spec)
    return _stamped(spec, one(spec, layer))


def total_params(tensors: tuple[Tensor, ...]) -> int:
    """Sum of elements over ``tensors``."""
    return sum(t.numel for t in tensors)
