"""Checks that a plan's parallel layout can run at all, with reasons a user can act on."""

from __future__ import annotations

from engine.errors import PlanError
from engine.ledger.states.offload_rules import offload_problems
from engine.plan import Plan


def layout_problems(plan: Plan) -> list[str]:
    """Every reason this layout cannot run; empty when it is legal."""
    par, arch = plan.parallelism, plan.model.architecture
    problems = []
    if arch.heads % par.tp != 0:
        problems.append(f"parallelism.tp ({par.tp}) must divide the {arch.heads} attention heads")
    if par.ep > 1:
        if arch.moe is None:
            problems.append("parallelism.ep > 1 needs a mixture-of-experts model")
        elif arch.moe.num_experts % par.ep != 0:
            problems.append(
                f"parallelism.ep ({par.ep}) must divide the {arch.moe.num_experts} experts"
            )
    if plan.batch.seq_len % par.cp != 0:
        problems.append(
            f"parallelism.cp ({par.cp}) must divide the sequence length ({plan.batch.seq_len})"
        )
    if (
        par.pp_layer_split is None
        and par.virtual_stages > 1
        and (arch.layers % (par.pp * par.virtual_stages) != 0)
    ):
        problems.append(
            f"{arch.layers} layers do not split into pp × virtual_stages = "
            f"{par.pp * par.virtual_stages} equal chunks"
        )
    gb = plan.batch.global_batch
    if gb is not None:
        per_step = plan.batch.micro_batch * plan.batch.grad_accum * par.dp * par.ep
        if gb != per_step:
            problems.append(
                f"batch.global_batch ({gb}) ≠ micro_batch × grad_accum × data-parallel "
                f"replicas = {per_step}"
            )
    problems.extend(offload_problems(plan))
    return problems


def check_layout(plan: Plan) -> None:
    """Raise :class:`PlanError` with every problem of the layout, if any."""
    problems = layout_problems(plan)
    if problems:
        raise PlanError("; ".join(problems))
