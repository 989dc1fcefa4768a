"""What is bought to run a number of ranks, and its shape in words.

A purchase comes in the shapes the hardware is sold in: whole nodes of the chosen node
preset, or — for a job smaller than one node — a single GPU or a partial node. A 1-GPU
QLoRA job runs on a workstation or one cloud GPU; rounding it to "one node × 8 GPUs,
7 idle" is not what its owner buys. Partial nodes come in powers of two up to the node
(cloud instances of the same GPU are offered as 1, 2, 4 and 8 GPUs, e.g. Google Cloud
A3 ``a3-highgpu-1g/2g/4g/8g``, A2 ``a2-highgpu-1g…8g``; workstations hold 1, 2 or 4),
so a 3-rank layout pays for 4. From one node up, whole nodes: the interconnect a
multi-node job needs is sold by the node.

Under ``policy.rounding = "gpu"`` every GPU is bought alone (exact ranks). Under
``"whole_node"`` — set by a node preset sold only whole, such as the DGX A100, which
NVIDIA's datasheet offers as one 8-GPU system — even a 1-rank job pays for a node.

The cost is monotone in the ranks, which the search's soundness needs
(:func:`engine.layout.search.minimum.search_growing` bisects on it).
"""

from __future__ import annotations


def partial_shapes(gpus_per_node: int) -> tuple[int, ...]:
    """The sizes smaller than one node a purchase may take: powers of two below it."""
    out, n = [], 1
    while n < gpus_per_node:
        out.append(n)
        n *= 2
    return tuple(out)


def procurement(world_size: int, gpus_per_node: int, rounding: str) -> int:
    """GPUs paid for to run ``world_size`` ranks: exact GPUs, or the smallest shape the
    hardware is sold in (a single GPU, a partial node, whole nodes)."""
    if rounding == "gpu":
        return world_size
    if world_size <= gpus_per_node and rounding != "whole_node":
        return next((s for s in partial_shapes(gpus_per_node) if s >= world_size), gpus_per_node)
    return -(-world_size // gpus_per_node) * gpus_per_node


def shape_words(gpus: int, gpus_per_node: int, rounding: str) -> str:
    """The purchase's shape and the rounding that made it, in words, after its count
    ("16 GPUs = 2 nodes × 8 (rounded to whole nodes)")."""
    if rounding == "gpu":
        return f"{gpus:,} GPU{'s' if gpus != 1 else ''}: single GPUs (policy.rounding = gpu)"
    whole = rounding == "whole_node"
    if gpus == 1 and not whole:
        return "1 GPU: a single GPU (a workstation or one cloud GPU), no node to fill"
    if gpus < gpus_per_node and not whole:
        return (
            f"{gpus} GPUs: a partial node ({gpus} of {gpus_per_node} per node; below one "
            f"node a purchase rounds up to {', '.join(map(str, partial_shapes(gpus_per_node)))} "
            f"GPUs)"
        )
    nodes = gpus // gpus_per_node
    return (
        f"{gpus:,} GPUs = {nodes:,} node{'s' if nodes != 1 else ''} × {gpus_per_node} "
        f"(rounded to whole nodes{'; the node is sold whole' if whole else ''})"
    )


def shape_only(gpus: int, gpus_per_node: int, rounding: str) -> str:
    """The shape without the count, for a sentence that names it first ("Buy 16 ×
    H100: 2 nodes × 8 (rounded to whole nodes)")."""
    words = shape_words(gpus, gpus_per_node, rounding)
    for cut in (": ", " = "):
        if cut in words:
            return words.split(cut, 1)[1]
    return words


def rounding_noun(rounding: str) -> str:
    """The unit a purchase rounds to, as a plural noun ("nodes", "GPUs", "whole nodes
    (sold whole)") for "rounding to …" in a report's or the CLI's counts line."""
    return {"gpu": "gpus", "whole_node": "nodes (sold whole)"}.get(rounding, "nodes")
