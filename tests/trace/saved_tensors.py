"""What autograd saves for backward, per decoder layer, for a grid case (real CPU tensors).

One forward of the case's tiny model with labels, under
``torch.autograd.graph.saved_tensors_hooks``: every storage a backward node keeps is
recorded once (parameters, buffers and the batch excluded), rounded up to 512 B as the
CUDA caching allocator does, and attributed to the module running when it was first
saved — a decoder layer (``model.layers.N`` / ``transformer.h.N``) or ``other``. Layer 0
also gets what all layers share (rotary cos / sin, the embedding's output); any later
layer is that layer alone, which is what the ledger's per-layer terms count.

    PYTHONPATH=. .venv/bin/python -m tests.trace.saved_tensors gemma2 [layer] [--list]
"""

from __future__ import annotations

import math
import re
import sys
from dataclasses import dataclass, field
from typing import Any

from engine.trace.build import build_meta_model, retie
from engine.trace.dtypes import casts_compute, compute_dtype
from engine.trace.method import apply_lora
from engine.trace.patches import trace_patches
from tests.trace.grid import Case

_LAYER = re.compile(r"(?:layers|\.h)\.(\d+)(?:\.|$)")


@dataclass(frozen=True)
class Saved:
    """One kept storage: the module that first saved it, its shape, dtype, bytes."""

    module: str
    shape: tuple[int, ...]
    dtype: str
    nbytes: int


@dataclass
class SavedSet:
    """Every kept storage of one forward, in the order first saved."""

    items: list[Saved] = field(default_factory=list)

    def by_layer(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for s in self.items:
            m = _LAYER.search(s.module)
            key = f"layer {m.group(1)}" if m else "other"
            out[key] = out.get(key, 0) + s.nbytes
        return out

    def layer(self, index: int) -> list[Saved]:
        return [s for s in self.items if (m := _LAYER.search(s.module)) and int(m[1]) == index]


def saved_set(case: Case, rounding: int = 512) -> SavedSet:
    """Run the case's forward on real CPU tensors and collect what autograd keeps."""
    import torch

    plan = case.plan()
    out = SavedSet()
    with trace_patches(rounding):
        model = build_meta_model(plan).model
        if plan.method.kind == "lora":
            model = apply_lora(plan, model)
        model.to_empty(device="cpu")
        retie(model)
        with torch.no_grad():
            for p in model.parameters():
                p.normal_(0, 0.02)
        stack = ["other"]

        def enter(name: str) -> Any:
            return lambda module, args: stack.append(name)

        def leave(module: Any, args: Any, output: Any) -> None:
            stack.pop()

        for name, mod in model.named_modules():
            if name:
                mod.register_forward_pre_hook(enter(name))
                mod.register_forward_hook(leave)
        ids = torch.randint(0, plan.model.architecture.vocab, (case.micro_batch, case.seq_len))
        skip = {t.untyped_storage().data_ptr() for t in (*model.parameters(), *model.buffers())}
        skip.add(ids.untyped_storage().data_ptr())
        seen: set[int] = set()
        keep: list[Any] = []

        def pack(t: Any) -> Any:
            st = t.untyped_storage()
            ptr = st.data_ptr()
            if ptr not in skip and ptr not in seen:
                seen.add(ptr)
                keep.append(t)
                n = math.ceil(st.nbytes() / rounding) * rounding
                out.items.append(Saved(stack[-1], tuple(t.shape), str(t.dtype)[6:], n))
            return t

        model.train()
        autocast = casts_compute(plan) and plan.parallelism.world_size == 1
        with (
            torch.autocast("cpu", dtype=compute_dtype(plan), enabled=autocast),
            torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t),
        ):
            model(input_ids=ids, labels=ids)
    return out


def main() -> None:
    family = sys.argv[1]
    layer = int(sys.argv[2]) if len(sys.argv) > 2 and sys.argv[2].isdigit() else 1
    s = saved_set(Case(family))
    print(s.by_layer())
    if "--list" in sys.argv:
        for item in s.layer(layer):
            print(f"{item.module:<50} {item.shape!s:<22} {item.dtype:<9} {item.nbytes:>10}")


if __name__ == "__main__":
    main()
