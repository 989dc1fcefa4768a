"""Which offload placements each strategy supports, with reasons a user can act on.

Facts (memory-model §7): DeepSpeed offloads parameters only under ZeRO-3, and the
optimizer under ZeRO-1/2/3 (NVMe for either needs ZeRO-3: ZeRO-Infinity); FSDP's CPU
offload moves parameters, gradients and optimizer state together; Megatron's
distributed optimizer can keep its optimizer on the CPU; DDP offloads nothing.
These rules do not depend on the layout: when one fails, every layout of the plan fails.
"""

from __future__ import annotations

from engine.errors import Problem
from engine.sections.parallel import Strategy
from engine.stacks.families import FSDP_FAMILIES, family_of, rule_of

_STRATEGY = "parallelism.strategy"
_PARAMS = "offload.params"
_OPTIMIZER = "offload.optimizer"


def offload_problems(strategy: Strategy, params: str, optimizer: str) -> list[Problem]:
    """Every reason these offload placements cannot run under ``strategy``."""
    if optimizer == "none" and params == "none":
        return []
    family = family_of(strategy)
    if family == "ddp":
        return [
            Problem(
                (_STRATEGY, _PARAMS, _OPTIMIZER),
                "offload needs a sharded strategy: DDP keeps every state on the GPU "
                "(choose ZeRO or FSDP in parallelism.strategy)",
            )
        ]
    if family in FSDP_FAMILIES:
        return _fsdp(params, optimizer)
    if family == "megatron":
        return _megatron(params, optimizer)
    return _deepspeed(strategy, params, optimizer)


def _fsdp(params: str, optimizer: str) -> list[Problem]:
    if params == "nvme" or optimizer == "nvme":
        return [
            Problem(
                (_STRATEGY, _PARAMS, _OPTIMIZER),
                "FSDP offloads to the CPU only; NVMe offload is DeepSpeed "
                "ZeRO-Infinity (parallelism.strategy zero3)",
            )
        ]
    if params != "cpu":
        return [
            Problem(
                (_PARAMS, _STRATEGY),
                "FSDP's CPU offload moves parameters, gradients and optimizer state "
                "together: set offload.params to cpu (optimizer-only offload is DeepSpeed "
                "ZeRO-Offload)",
            )
        ]
    return []


def _megatron(params: str, optimizer: str) -> list[Problem]:
    out = []
    if params != "none":
        out.append(
            Problem(
                (_PARAMS, _STRATEGY),
                "Megatron's distributed optimizer does not offload parameters; "
                "set offload.params to none",
            )
        )
    if optimizer == "nvme":
        out.append(
            Problem(
                (_OPTIMIZER, _STRATEGY),
                "Megatron offloads the optimizer to the CPU only, not NVMe: "
                "set offload.optimizer to cpu",
            )
        )
    return out


def _deepspeed(strategy: Strategy, params: str, optimizer: str) -> list[Problem]:
    out = []
    if params != "none" and rule_of(strategy).zero_stage != 3:
        out.append(
            Problem(
                (_PARAMS, _STRATEGY),
                "offload.params needs ZeRO stage 3 (parallelism.strategy zero3): "
                "DeepSpeed offloads parameters only with ZeRO-3",
            )
        )
    if optimizer == "nvme" and rule_of(strategy).zero_stage != 3:
        out.append(
            Problem(
                (_OPTIMIZER, _STRATEGY),
                "offload.optimizer nvme (ZeRO-Infinity) needs parallelism.strategy zero3",
            )
        )
    # Parameter-only offload is legal: DeepSpeed's stage3.py ``_configure_offloading``
    # sets offload_param and offload_optimizer independently (axolotl ships
    # zero3_bf16_cpuoffload_params.json); the optimizer step then runs on the GPU.
    return out
