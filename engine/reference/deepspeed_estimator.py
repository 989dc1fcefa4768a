"""DeepSpeed's cold model-state estimators, as a reference mode.

DeepSpeed ships ``estimate_zero2_model_states_mem_needs`` and
``estimate_zero3_model_states_mem_needs`` (DeepSpeed 0.19.6
deepspeed/runtime/zero/stage_1_and_2.py, stage3.py). They count model states only and
pad host RAM with an ``additional_buffer_factor`` of 1.5. MemPlan reproduces their
arithmetic here (formulas restated, not their code) so users can see both numbers side
by side; MemPlan's own ledger remains the estimate.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from engine.models.inventory import build_inventory
from engine.plan import Plan
from engine.stacks.defaults import resolved
from engine.units import ceil_div

BUFFER_FACTOR = 1.5
"""DeepSpeed's default additional_buffer_factor on host RAM."""


@dataclass(frozen=True, slots=True)
class DeepSpeedReference:
    """DeepSpeed's figures: host RAM per node and HBM per GPU, in bytes."""

    stage: int
    cpu_bytes_per_node: int
    gpu_bytes_per_gpu: int
    formula: str


def largest_module_params(plan: Plan) -> int:
    """DeepSpeed's "largest layer": the most parameters one module holds directly
    (``m.parameters(recurse=False)``) — for a decoder, usually the embedding."""
    per_module: dict[str, int] = defaultdict(int)
    for t in build_inventory(plan.model.architecture):
        per_module[t.name.rsplit(".", 1)[0]] += t.numel
    return max(per_module.values())


def zero2(
    total: int, gpus_per_node: int, nodes: int, offload: bool, factor: float = BUFFER_FACTOR
) -> tuple[int, int, str]:
    """(cpu per node, gpu per GPU, words) by estimate_zero2_model_states_mem_needs
    (DeepSpeed 0.19.6 runtime/zero/stage_1_and_2.py; 2·P + 18·P/N without offload
    since mid-2024, 4·P + 16·P/N before)."""
    gpus = gpus_per_node * nodes
    if offload:
        cpu = total * max(4 * gpus, 16) * factor
        return int(cpu), 2 * total, (f"GPU 2·P; host P·max(4·{gpus} GPUs, 16)·{factor}")
    # 2 = params_16bit; 18 = 2 grads_16bit + 4 grads_32bit + 4 params_32bit + 8 moments
    cpu = total * 4 * gpus_per_node * factor
    return (
        int(cpu),
        2 * total + int(18 * total / gpus),
        (f"GPU 2·P + 18·P/{gpus}; host P·4·{gpus_per_node} GPUs per node·{factor}"),
    )


def zero3(
    total: int,
    largest: int,
    gpus_per_node: int,
    nodes: int,
    offload_opt: bool,
    offload_params: bool,
    zero_init: bool,
    factor: float = BUFFER_FACTOR,
) -> tuple[int, int, str]:
    """(cpu per node, gpu per GPU, words) by estimate_zero3_model_states_mem_needs."""
    gpus = gpus_per_node * nodes
    per_node_share = 1 / nodes
    largest_mem = 4 * largest
    if offload_opt and offload_params:
        gpu = largest_mem
        k = 18
    elif offload_opt:
        gpu = largest_mem + int(2 * total / gpus)
        k = 16
    else:
        gpu = largest_mem + int(18 * total / gpus)
        if zero_init:
            return (
                int(largest * 4 * gpus_per_node * factor),
                gpu,
                (f"GPU 4·largest + 18·P/{gpus}; host largest·4·{gpus_per_node}·{factor}"),
            )
        return (
            int(total * 4 * gpus_per_node * factor),
            gpu,
            (f"GPU 4·largest + 18·P/{gpus}; host P·4·{gpus_per_node}·{factor}"),
        )
    if zero_init:
        cpu = total * k * per_node_share * factor
        words = f"host P·{k}/{nodes} node(s)·{factor}"
    else:
        cpu = total * max(4 * gpus_per_node, k * per_node_share) * factor
        words = f"host P·max(4·{gpus_per_node}, {k}/{nodes})·{factor}"
    return int(cpu), gpu, f"GPU {'4·largest' if offload_params else '4·largest + 2·P/N'}; {words}"


def deepspeed_reference(plan: Plan) -> DeepSpeedReference | None:
    """DeepSpeed's estimate for this plan's ZeRO stage, or None for other strategies."""
    plan = resolved(plan)  # the model-load path may be left to the stack
    strategy = plan.parallelism.strategy
    if strategy not in ("zero2", "zero3"):
        return None
    par, hw = plan.parallelism, plan.hardware
    per_node = min(par.ranks_per_node or hw.gpus_per_node, par.world_size)
    nodes = ceil_div(par.world_size, per_node)
    total = sum(t.numel for t in build_inventory(plan.model.architecture))
    off = plan.offload
    if strategy == "zero2":
        cpu, gpu, words = zero2(total, per_node, nodes, off.optimizer != "none")
        return DeepSpeedReference(2, cpu, gpu, words)
    cpu, gpu, words = zero3(
        total,
        largest_module_params(plan),
        per_node,
        nodes,
        off.optimizer != "none",
        off.params != "none",
        plan.host.model_init != "full_copy_per_rank",
    )
    return DeepSpeedReference(3, cpu, gpu, words)
