"""FSDP1's sharded gradients in its post-backward stream's pool
(``engine.allocator.reserve.grad_pool_free``), hand-derived from torch's FSDP1 code.

``torch/distributed/fsdp/_runtime_utils.py``: ``_post_backward_hook`` enters
``state._post_backward_stream`` and calls ``_reduce_grad``, whose
``_get_reduce_scatter_tensors`` makes ``new_sharded_grad = torch.empty_like(chunks[0])``
there (a block of that stream's pool); ``_accumulate_sharded_grad`` keeps it as
``_saved_grad_shard`` and ``_flat_param.py`` ``prepare_gradient_for_optim`` hands that
very tensor to ``flat_param.grad``. ``optimizer.zero_grad()`` (torch's default
``set_to_none=True``; Answer.AI's ``train.py`` calls it after each step) frees it back to
that pool, which only the next backward's reduce-scatters reuse: from the second step on
it is reserved through the forward and the loss while no gradient is live.

Answer.AI's Llama-2-7B LoRA as ``tests/engine/allocator/published.py`` plans it (r 64 on
q, k, v, o, gate, up, down; bf16 adapters; FSDP1 over 2 ranks): per layer q, k, v, o
4 × (64·4096 + 4096·64) = 2,097,152, gate and up 2 × (64·4096 + 11008·64) = 1,933,312,
down 64·11008 + 4096·64 = 966,656: 4,997,120 parameters; × 32 layers = 159,907,840;
÷ 2 ranks × 2 B = 159,907,840 B (GRADS). The published case's own targets leave o out
(fsdp_qlora's 'all' list): 143,130,624 B there.
"""

from __future__ import annotations

from engine.allocator.reserve import ReserveModel, SideBytes, grad_pool_free, reserved_extra
from engine.estimate import estimate
from tests.engine.allocator.test_loss_floor import GRADS, lora

LIVE = frozenset({"backward.end", "optimizer"})


def _side(grads: int, live: frozenset[str] = LIVE) -> SideBytes:
    side = SideBytes(1_000, (5, 7), 100, 200)
    side.grads, side.grads_at = grads, live
    return side


def test_freed_only_where_the_gradients_are_not_live() -> None:
    side = _side(GRADS)
    assert grad_pool_free(side, "backward.start") == GRADS
    assert grad_pool_free(side, "forward") == GRADS
    assert grad_pool_free(side, "backward.end") == 0  # in use: allocated already
    assert grad_pool_free(side, "optimizer") == 0
    assert grad_pool_free(side, None) == 0  # no moment known: nothing claimed
    assert grad_pool_free(1_000, "forward") == 0  # not FSDP1's side bytes


def test_the_fsdp1_reserve_adds_the_free_pool_at_its_moment() -> None:
    """FSDP1 branch of ``reserved_extra``: no transient (steady = the range), so the
    compute stream keeps the construction cache (5, 7) and the side pools one unit (100)
    at the high end; the freed gradients add to both ends where they are not live."""
    m = ReserveModel(False, (0.0, 0.0), (1.0, 1.0), False, None, True)
    side = _side(GRADS)
    steady = (10_000, 10_000)
    base = reserved_extra(m, 10_000, 10_000, steady, side, None, "backward.end")
    assert base == (5, 7 + 100)
    got = reserved_extra(m, 10_000, 10_000, steady, side, None, "backward.layers")
    assert got == (5 + GRADS, 7 + 100 + GRADS)


def test_answerai_lora_keeps_its_adapters_sharded_gradients_in_the_pool() -> None:
    side = estimate(lora(6)).heaviest.totals.side
    assert getattr(side, "grads", 0) == GRADS
    assert getattr(side, "grads_at", frozenset()) == LIVE


def test_no_pool_when_zeros_are_filled_or_the_gradients_are_on_the_host() -> None:
    """``zero_grad(set_to_none=False)`` keeps the blocks in use (allocated: the rows
    count them at every moment); under ``CPUOffload`` the gradient rows are the host's
    ``_cpu_grad`` (none in HBM)."""
    filled = estimate(lora(6, **{"runtime.zero_grad": "zero_fill"})).heaviest.totals.side
    assert getattr(filled, "grads", 0) == 0
    off = estimate(lora(1, **{"offload.params": "cpu"})).heaviest.totals.side
    assert getattr(off, "grads", 0) == 0


def test_accumulated_gradients_are_live_at_the_loss() -> None:
    """With grad_accum 2 the rows hold the gradients from the forward on (their
    accumulated moments): the pool is in use at the loss, nothing is added there."""
    side = estimate(lora(6, **{"batch.grad_accum": 2})).heaviest.totals.side
    assert getattr(side, "grads", 0) == GRADS
    assert grad_pool_free(side, "backward.start") == 0
