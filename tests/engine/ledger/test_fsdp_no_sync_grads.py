"""FSDP's sharded gradients under ``no_sync`` (``parallelism.knobs.accumulate_without_sync``),
hand-derived from torch's FSDP1 code.

``torch/distributed/fsdp/_runtime_utils.py`` ``_post_backward_hook``: while
``not state._sync_gradients`` (inside ``FullyShardedDataParallel.no_sync``) it returns
before ``_reduce_grad``, so the flat parameter keeps its unsharded ``.grad`` and no sharded
gradient is made; ``_post_backward_final_callback`` leaves that ``.grad`` for the next
micro-batch. The sharded gradients exist only from the synced micro-batch's backward on:
``hbm.grads`` is not live across micro-batches, ``hbm.grads_unsharded.accumulation`` is.
Accelerate's ``Accelerator.accumulate`` (v0.28.0) enters ``no_sync`` on every micro-batch
but the last (HF Trainer 4.39 wraps each ``training_step`` in it).

Answer.AI's Llama-2-7B LoRA as ``tests/engine/allocator/published.py`` plans it (FSDP1
over 2 ranks, bf16 adapters r 64 on q, k, v, o, gate, up, down): 4,997,120 adapter
parameters per layer × 32 = 159,907,840; sharded gradients 159,907,840 ÷ 2 × 2 B =
159,907,840 B; unsharded 159,907,840 × 2 B = 319,815,680 B.
"""

from __future__ import annotations

from engine.allocator.reserve import grad_pool_free
from engine.estimate import estimate
from engine.ledger.row import Row
from tests.engine.allocator.test_loss_floor import GRADS, lora

UNSHARDED = 319_815_680


def _rows(no_sync: bool) -> dict[str, Row]:
    plan = lora(6, **{"batch.grad_accum": 2, "parallelism.knobs.accumulate_without_sync": no_sync})
    return {r.id: r for r in estimate(plan).heaviest.rows}  # type: ignore[arg-type]


def test_without_no_sync_the_sharded_gradients_accumulate() -> None:
    rows = _rows(False)
    grads = rows["hbm.grads"]
    assert grads.high == GRADS
    assert {"forward", "backward.start"} <= grads.accumulated_moments
    assert "hbm.grads_unsharded.accumulation" not in rows


def test_under_no_sync_only_the_unsharded_gradients_cross_micro_batches() -> None:
    rows = _rows(True)
    grads = rows["hbm.grads"]
    assert grads.high == GRADS
    assert grads.accumulated_moments == frozenset()
    assert grads.moments == frozenset({"backward.end", "optimizer"})
    assert rows["hbm.grads_unsharded.accumulation"].high == UNSHARDED


def test_under_no_sync_the_freed_sharded_gradients_stay_reserved_at_the_loss() -> None:
    """The last step's sharded gradients, freed by zero_grad into FSDP1's post-backward
    pool, are not live again before the synced micro-batch's backward: free at the loss."""
    plan = lora(6, **{"batch.grad_accum": 2, "parallelism.knobs.accumulate_without_sync": True})
    side = estimate(plan).heaviest.totals.side  # type: ignore[arg-type]
    assert grad_pool_free(side, "backward.start") == GRADS
    assert grad_pool_free(side, "backward.end") == 0
