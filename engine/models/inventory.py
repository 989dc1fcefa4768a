"""Architecture spec → every parameter tensor, exact to the element.

Each tensor carries a *role* because later rules key on it: tensor parallelism splits
column-parallel roles on dim 0 and row-parallel roles on dim 1 (see ``roles.py``),
pipeline stages place layers by index, LoRA targets by role, expert parallelism divides
routed experts. Shapes follow PyTorch's ``nn.Linear`` convention ``(out_features,
in_features)``, which is also the dim 0 that FSDP2 chunks.

The family layouts live in ``layouts.py`` (names and order), ``attention.py`` and
``feedforward.py`` (blocks); this module assembles them, stamps the stored dtype, and
caches the result per spec (specs are frozen, hence hashable), so a 256-expert model's
~90k tensors are built once however often the ledger asks.
"""

from __future__ import annotations

from dataclasses import replace
from functools import lru_cache

from engine.models.layouts import family_layout
from engine.models.spec import ArchitectureSpec
from engine.models.tensor import Role, Tensor, TensorDtype, TensorKind

__all__ = ["Role", "Tensor", "TensorKind", "build_inventory", "total_params"]

# Roles an FP8 block-quantised checkpoint keeps in 16-bit. DeepSeek-V3's files confirm it:
# their safetensors metadata (684,531,386,000 elements) equals the parameters plus one fp32
# scale per 128×128 block of exactly the 2-D weights not listed here (MTP's eh_proj is bf16).
_HIGH_PRECISION_ROLES = frozenset(
    {"embedding", "position_embedding", "lm_head", "mtp_embedding", "mtp_head", "router", "mtp"}
)


def _stored_dtype(spec: ArchitectureSpec, t: Tensor) -> TensorDtype:
    if t.dtype == "fp32":  # explicitly full-precision in every published checkpoint
        return "fp32"
    if spec.stored_dtype != "fp8_e4m3":
        return spec.stored_dtype
    if t.kind == "weight" and len(t.shape) == 2 and t.role not in _HIGH_PRECISION_ROLES:
        return "fp8_e4m3"
    return "bf16"


@lru_cache(maxsize=64)
def build_inventory(spec: ArchitectureSpec) -> tuple[Tensor, ...]:
    """Every parameter tensor of the model, in checkpoint order (cached per spec)."""
    out: list[Tensor] = []
    for t in family_layout(spec):
        dtype = _stored_dtype(spec, t)
        out.append(t if dtype == t.dtype else replace(t, dtype=dtype))
    return tuple(out)


def total_params(tensors: tuple[Tensor, ...]) -> int:
    """Sum of elements over ``tensors``."""
    return sum(t.numel for t in tensors)
