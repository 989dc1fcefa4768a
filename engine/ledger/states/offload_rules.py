"""Which offload placements each strategy supports, with reasons a user can act on.

Facts (memory-model §7): DeepSpeed offloads parameters only under ZeRO-3, and the
optimizer under ZeRO-1/2/3 (NVMe for either needs ZeRO-3: ZeRO-Infinity); FSDP's CPU
offload moves parameters, gradients and optimizer state together; Megatron's
distributed optimizer can keep its optimizer on the CPU; DDP offloads nothing.
"""

from __future__ import annotations

from engine.plan import Plan
from engine.stacks.families import rule_of


def offload_problems(plan: Plan) -> list[str]:
    """Every reason the plan's offload settings cannot run; empty when they can."""
    off, strategy = plan.offload, plan.parallelism.strategy
    rule = rule_of(strategy)
    problems: list[str] = []
    if off.optimizer == "none" and off.params == "none":
        return problems
    if rule.family == "ddp":
        problems.append(
            "offload needs a sharded strategy: DDP keeps every state on the GPU "
            "(choose ZeRO or FSDP in parallelism.strategy)"
        )
        return problems
    if rule.fsdp:
        if off.params == "nvme" or off.optimizer == "nvme":
            problems.append(
                "FSDP offloads to the CPU only; NVMe offload is DeepSpeed "
                "ZeRO-Infinity (parallelism.strategy zero3)"
            )
        elif off.params != "cpu":
            problems.append(
                "FSDP's CPU offload moves parameters, gradients and optimizer state "
                "together: set offload.params to cpu (optimizer-only offload is DeepSpeed "
                "ZeRO-Offload)"
            )
        return problems
    if rule.family == "megatron":
        if off.params != "none":
            problems.append(
                "Megatron's distributed optimizer does not offload parameters; "
                "set offload.params to none"
            )
        if off.optimizer == "nvme":
            problems.append("Megatron offloads the optimizer to the CPU only, not NVMe")
        return problems
    # DeepSpeed ZeRO
    if off.params != "none" and strategy != "zero3":
        problems.append(
            "offload.params needs ZeRO stage 3 (parallelism.strategy zero3): "
            "DeepSpeed offloads parameters only with ZeRO-3"
        )
    if off.optimizer == "nvme" and strategy != "zero3":
        problems.append("offload.optimizer nvme (ZeRO-Infinity) needs parallelism.strategy zero3")
    if off.params != "none" and off.optimizer == "none":
        problems.append(
            "DeepSpeed parameter offload also needs offload.optimizer (cpu or "
            "nvme): the optimizer step must run where the parameters live"
        )
    return problems
