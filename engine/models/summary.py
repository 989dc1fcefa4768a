"""Totals a user reads first: total, trainable, active per token, embedding split, wrap units.

"Active per token" counts every tensor a token passes through: all dense tensors (the
whole embedding table included, as model cards do) plus ``top_k`` of each MoE layer's
routed experts. The default wrap unit is one decoder layer (what FSDP auto-wrap and
DeepSpeed's ``largest_layer`` use); the root unit holds everything outside the layers.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from types import MappingProxyType

from engine.models.inventory import build_inventory
from engine.models.roles import is_embedding, is_expert_parallel
from engine.models.spec import ArchitectureSpec
from engine.models.tensor import Tensor


@dataclass(frozen=True, slots=True)
class LayerRow:
    """One wrap unit's parameters: a decoder layer, the MTP module, or the root."""

    unit: str  # "layer 0", …, "mtp", "root (embeddings, final norm, head)"
    layer: int | None
    kind: str  # "dense", "moe", "mtp" or "root"
    params: int
    active_params: int
    tensors: int


@dataclass(frozen=True, slots=True)
class ModelSummary:
    """Parameter totals of one architecture (elements, not bytes)."""

    total: int
    trainable: int  # a full fine-tune trains every parameter by default
    active_per_token: int
    embedding: int  # token / position embeddings and output heads (MTP copies included)
    non_embedding: int
    mtp: int  # multi-token-prediction module (0 when absent)
    mtp_active: int  # of which one token uses
    by_dtype: Mapping[str, int]  # stored dtype → elements (read-only: summaries are cached)
    largest_layer: LayerRow  # the default wrap unit: the largest decoder layer
    largest_unit: LayerRow  # the largest of all units, root and MTP included
    rows: tuple[LayerRow, ...]

    @property
    def main_model(self) -> int:
        """Total without the MTP module (DeepSeek's headline "671B")."""
        return self.total - self.mtp

    @property
    def main_active_per_token(self) -> int:
        """Active parameters without the MTP module (DeepSeek's headline "37B")."""
        return self.active_per_token - self.mtp_active


def _active(tensors: list[Tensor], spec: ArchitectureSpec) -> int:
    """Parameters of ``tensors`` one token uses: routed experts count top_k / E."""
    dense = sum(t.numel for t in tensors if not is_expert_parallel(t))
    routed = sum(t.numel for t in tensors if is_expert_parallel(t))
    if routed == 0 or spec.moe is None:
        return dense + routed
    return dense + routed * spec.moe.top_k // spec.moe.num_experts


def _row(
    unit: str, layer: int | None, kind: str, ts: list[Tensor], spec: ArchitectureSpec
) -> LayerRow:
    return LayerRow(unit, layer, kind, sum(t.numel for t in ts), _active(ts, spec), len(ts))


@lru_cache(maxsize=64)
def summarize(spec: ArchitectureSpec) -> ModelSummary:
    """Totals, the per-layer table and the largest wrap unit of ``spec`` (cached per spec)."""
    inv = build_inventory(spec)
    by_layer: dict[int, list[Tensor]] = defaultdict(list)
    root: list[Tensor] = []
    mtp: list[Tensor] = []
    by_dtype: dict[str, int] = defaultdict(int)
    for t in inv:
        by_dtype[t.dtype] += t.numel
        if t.module == "mtp":
            mtp.append(t)
        elif t.layer is None:
            root.append(t)
        else:
            by_layer[t.layer].append(t)
    rows: list[LayerRow] = []
    for i in sorted(by_layer):
        ts = by_layer[i]
        kind = "moe" if any(is_expert_parallel(t) for t in ts) else "dense"
        rows.append(_row(f"layer {i}", i, kind, ts, spec))
    layer_rows = list(rows)
    if mtp:
        rows.append(_row("mtp", None, "mtp", mtp, spec))
    rows.append(_row("root (embeddings, final norm, head)", None, "root", root, spec))
    total = sum(r.params for r in rows)
    embedding = sum(t.numel for t in inv if is_embedding(t))
    largest_layer = max(layer_rows, key=lambda r: r.params)
    return ModelSummary(
        total=total,
        trainable=total,
        active_per_token=sum(r.active_params for r in rows),
        embedding=embedding,
        non_embedding=total - embedding,
        mtp=sum(t.numel for t in mtp),
        mtp_active=_active(mtp, spec),
        by_dtype=MappingProxyType(dict(by_dtype)),
        largest_layer=largest_layer,
        largest_unit=max(rows, key=lambda r: r.params),
        rows=tuple(rows),
    )
