"""ZeRO-3's reuse distance: which parameters stay gathered from their forward to their
backward (``hbm.gathered.reused.*``).

DeepSpeed 0.19.6 runtime/zero/partitioned_param_coordinator.py ``__params_to_release``:
when a module finishes, its parameters are *not* released if they recur in the recorded
trace before ``stage3_max_reuse_distance`` elements of parameters have been traversed
(walking from the next module: ``if params_traversed >= max: break``, then the module's
parameters are spared, then their elements counted). The trace is forward then backward,
module by module; each parameter's next use after its forward is its backward (or, for
a tied embedding, the output head). With the default 1e9, the lm_head (used again at
once by its own backward) stays gathered through the loss; on small models whole layers
next to it do too.

The trace's order within a layer's backward is autograd's (sibling modules such as
``gate_proj`` and ``up_proj`` may come in either order), so a module whose reuse lands
within one sibling's worth of the limit may or may not be spared: those count in the
high end only.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from itertools import accumulate

from engine.models.inventory import build_inventory
from engine.models.spec import ArchitectureSpec


@dataclass(frozen=True, slots=True)
class Reused:
    """Elements kept gathered at the loss: (low, high) for the root modules and for the
    decoder layers' modules, and how many modules each covers."""

    root: tuple[int, int]
    layers: tuple[int, int]
    modules: tuple[int, int]


def _modules(
    arch: ArchitectureSpec, layers: range, first: bool, last: bool, threshold: int
) -> list[tuple[str, int, int | None]]:
    """(parameter key, partitioned elements, layer) per module use in forward order.

    Persistent parameters (fewer elements than ``stage3_param_persistence_threshold``)
    are never released, so they only count towards the distance (key ``""``)."""
    uses: dict[str, list[tuple[str, int]]] = {}
    order: list[str] = []
    layer_of: dict[str, int | None] = {}
    embedding = ""
    for t in build_inventory(arch):
        if t.layer is None:
            is_embed = t.role in ("embedding", "position_embedding")
            if (is_embed and not first) or (not is_embed and not last):
                continue
        elif t.layer not in layers:
            continue
        module = t.name.rsplit(".", 1)[0]
        if module not in uses:
            uses[module] = []
            order.append(module)
            layer_of[module] = t.layer
        key = t.name if t.numel >= threshold else ""
        uses[module].append((key, t.numel))
        if t.role == "embedding":
            embedding = t.name
    out = [(key, n, layer_of[m]) for m in order for key, n in uses[m]]
    if arch.tied_embeddings and last and embedding:
        n = next(t.numel for t in build_inventory(arch) if t.name == embedding)
        out.append((embedding if n >= threshold else "", n, None))  # the output head
    return out


@lru_cache(maxsize=256)
def reused_at_loss(
    arch: ArchitectureSpec,
    layers: range,
    first: bool,
    last: bool,
    reuse_distance: int,
    threshold: int,
) -> Reused:
    """Parameters ZeRO-3 keeps gathered across the loss, by the reuse-distance walk."""
    fwd = _modules(arch, layers, first, last, threshold)
    trace = fwd + fwd[::-1]
    prefix = [0, *accumulate(n for _, n, _ in trace)]
    sibling = max((n for _, n, layer in fwd if layer is not None), default=0)
    half = len(fwd)
    next_use: dict[str, int] = {}
    nxt = [len(trace)] * len(trace)
    for j in range(len(trace) - 1, -1, -1):
        key = trace[j][0]
        if key:
            nxt[j] = next_use.get(key, len(trace))
            next_use[key] = j
    root, lay, count = [0, 0], [0, 0], [0, 0]
    seen: set[str] = set()
    for i in range(half):
        key, n, layer = trace[i]
        j = nxt[i]
        if not key or key in seen or j >= len(trace) or j < half:
            continue  # persistent, counted, or next used in forward: not across the loss
        distance = prefix[j] - prefix[i + 1]
        if distance >= reuse_distance:
            continue
        sure = distance + sibling < reuse_distance or layer is None
        seen.add(key)
        bucket = root if layer is None else lay
        for end in (0, 1) if sure else (1,):
            bucket[end] += n
            count[end] += 1
    return Reused((root[0], root[1]), (lay[0], lay[1]), (count[0], count[1]))
