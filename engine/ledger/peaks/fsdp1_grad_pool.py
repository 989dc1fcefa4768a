"""FSDP1's sharded gradients as its post-backward stream's pool sees them.

Why a module: the reserve (:func:`~engine.allocator.reserve.grad_pool_free`) needs the
bytes FSDP1's ``_reduce_grad`` allocates on ``state._post_backward_stream`` each step and
the moments they are live at; both are read off the stage's gradient rows here, so the
allocator code stays free of rows and plans.
"""

from __future__ import annotations

from engine.allocator.reserve import grad_pool_free
from engine.ledger.row import Moment, Row
from engine.plan import Plan
from engine.units import fmt_count


def fsdp1_grad_pool(rows: tuple[Row, ...], plan: Plan) -> tuple[int, frozenset[str]]:
    """FSDP1's sharded gradients in its post-backward stream's pool (the persistent HBM
    gradient rows) and the moments they are live at, where ``zero_grad(set_to_none=True)``
    frees them each step (``torch/distributed/fsdp/_runtime_utils.py``
    ``_get_reduce_scatter_tensors`` makes each under that stream; ``_flat_param.py``
    ``prepare_gradient_for_optim`` hands it to ``.grad``). None where zeros are filled
    (the blocks stay in use) or the gradient rows are not in HBM: under CPU offload they
    are the host's ``_cpu_grad`` (the device shards ``_offload_grad`` copies from still
    pass through that pool until ``prepare_gradient_for_optim`` drops them: not counted)."""
    if plan.runtime.zero_grad != "set_to_none":
        return 0, frozenset()
    grads = [
        r for r in rows if r.location == "hbm" and r.group == "gradients" and r.kind == "persistent"
    ]
    accumulating = plan.batch.grad_accum > 1
    none: frozenset[Moment] = frozenset()
    at: frozenset[str] = none.union(
        *(r.moments | (r.accumulated_moments if accumulating else none) for r in grads)
    )
    return sum(r.high for r in grads), at


def pool_words(side: int, moment: str | None) -> str:
    """The reserve row's words for the pool's free bytes at ``moment`` ("" when none)."""
    freed = grad_pool_free(side, moment)
    if not freed:
        return ""
    return (
        f" + {fmt_count(freed)} B of sharded gradients zero_grad freed into the "
        "post-backward stream's pool"
    )
