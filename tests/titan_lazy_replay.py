"""Replay torchtitan's 70B 2D step twice, with AdamW's states created lazily inside the
first ``optimizer.step()`` (as torch does) and, for comparison, before the first step (the
steady-state layout the ledger and ``tests/titan_2d_replay.py`` assume) — a script, not
a test.

    PYTHONPATH=. .venv/bin/python tests/titan_lazy_replay.py

Why: torchtitan 9dec370 logs ``reserved_bytes.all.peak`` (``torchtitan/metrics.py``
``DeviceMemoryMonitor.get_peak_stats``) and resets the peaks after every logged step
(``reset_peak_stats`` → ``torch.cuda.reset_peak_memory_stats``), but a reset sets a peak
to the *current* value, and reserved memory only falls on ``empty_cache`` or an
out-of-memory retry (neither is called by ``train.py``), so the logged reserved figure is
the run's high-water mark whatever step it was read at. Whatever layout the first step
leaves in the cache is therefore kept in the published figure.

What the first step does once (torch ``optim/adamw.py`` ``_init_group``): per parameter,
in registration order, ``state['exp_avg']`` and ``state['exp_avg_sq']`` by
``torch.zeros_like(p, memory_format=torch.preserve_format)`` — so the moments are carved
out of whatever step 1's forward and backward left cached, and step 2's transients meet
that layout. ``_multi_tensor_adamw`` (foreach; torchtitan 9dec370 ``build_optimizers``
passes ``foreach = not fused``, fused off) then makes one temporary per parameter,
``exp_avg_sq_sqrt = torch._foreach_sqrt(exp_avg_sqs)``, freed at the step's end.

The forward and loss follow ``tests/titan_2d_replay.py`` (``Step.block``); each rank's
parameters are its FSDP 32 × TP 8 local shards, one request each (FSDP2's
``FSDPParam._init_sharded_param`` pads and allocates per parameter), in torchtitan's
module order (attention wq wk wv wo, feed_forward w1 w2 w3, the two norms). The layers'
backward is coarse (a recompute of the block's forward requests, the block's input,
hidden and MLP gradients, the unsharded bf16 weight gradients and FSDP2's fp32
reduce-scatter input on the compute stream, torch ≥ 2.5 ``foreach_reduce``): its sizes
are the step's, its exact order is not known here. FSDP2's side streams are left out as
in the 2-D replay.

``AsyncTp`` replays the table's other 2-D row (async TP: 67.6 GiB published, 4.3 below):
only the compiled blocks' collectives differ, so what the replay gives for that
difference says how much of the blocks' collective traffic it sees.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from engine.units import GiB
from tests.titan_2d_replay import INTER, KV, TL, TP, VOCAB, H, Q, Step, T

FSDP = 32
LAYERS = 80
HEAD_ROWS = 128_256 // TP  # the vocab shard of tok_embeddings / output under TP


def layer_params() -> list[int]:
    """One block's fp32 local shards, bytes, in torchtitan's registration order."""
    wq, wkv, wo = Q * H, KV * H, H * Q
    mlp = INTER * H
    sizes = [wq, wkv, wkv, wo, mlp, mlp, mlp]
    return [n * 4 // FSDP for n in sizes] + [H * 4 // FSDP, H * 4 // FSDP]


def all_params(layers: int = LAYERS) -> list[int]:
    """Every parameter's fp32 local shard on one rank, in module order."""
    emb = HEAD_ROWS * H * 4 // FSDP
    return [emb] + layer_params() * layers + [H * 4 // FSDP, emb]


class TwoSteps(Step):
    """Train steps, with the optimizer states made before step 1 or inside it."""

    def __init__(self, expandable: bool, lazy: bool, layers: int = LAYERS) -> None:
        super().__init__(expandable, cat=True)
        self.lazy = lazy
        self.layers = layers
        self.states: list[int] = []
        self.reserved_after: list[int] = []
        self.peaks: list[tuple[int, int]] = []
        self.grad = 0
        self.last_unit = 0

    def make_states(self) -> None:
        for nbytes in all_params(self.layers):
            self.states += [self.new(nbytes), self.new(nbytes)]

    def adam(self) -> None:
        if not self.states:
            self.make_states()
        temps = [self.new(nbytes) for nbytes in all_params(self.layers)]
        self.free(*temps)

    def head_and_loss(self, x: int) -> None:
        """Final norm, output projection and ``loss_parallel``'s forward and backward,
        as ``Step.run`` requests them; every block is freed after the loss's backward."""
        up32 = self.new(TL * H * 4)
        sq = self.new(TL * H * 4)
        self.free(sq)
        normed = self.new(TL * H * 2)
        gathered = self.gather(TL * H * 2)
        result = self.loss_forward()
        dlogits = self.new(T * VOCAB * 2)
        self.free(result)
        dgathered = self.new(T * H * 2)
        self.free(dlogits, gathered)
        dnormed = self.scatter(dgathered)
        dx = self.new(TL * H * 2)
        self.free(dnormed, normed, up32, x)
        self.grad = dx

    def block_backward(self, inp: int, kept: int | None) -> None:
        """One block's recompute and backward (coarse; see the module docstring). The
        last block kept its unit after forward (reshard_after_forward False); the
        recompute's own request stands for it (freed first), the others re-gather."""
        if kept is not None:
            self.free(kept)
        out = self.block(inp, last=True)  # the recompute, on the backward's unit
        unit = self.last_unit
        self.free(out)
        d_mlp = [self.new(T * INTER * 2) for _ in range(2)]
        wgrads = [self.new(n // 2 * FSDP) for n in layer_params()[4:7]]
        dh = self.gather(TL * H)
        self.free(*d_mlp)
        wgrads += [self.new(n // 2 * FSDP) for n in layer_params()[:4]]
        dq = self.new(T * Q * 2)
        dkv = [self.new(T * KV * 2) for _ in range(2)]
        self.free(dh)
        dx = self.scatter(self.new(T * H * 2))
        self.free(dq, *dkv)
        rs_in = self.new(sum(layer_params()) * FSDP)  # fp32 reduce-scatter input
        self.free(*wgrads)
        self.free(rs_in, self.grad, unit, inp)
        self.grad = dx

    def new(self, nbytes: int) -> int:
        i = super().new(nbytes)
        if nbytes == 213_942_272:
            self.last_unit = i
        return i

    def train_step(self) -> None:
        x = self.new(TL * H * 2)
        inputs = []
        units: list[int | None] = []
        last = self.layers - 1
        for layer in range(self.layers):
            inputs.append(x)
            x = self.block(x, layer == last)
            units.append(self.last_unit if layer == last else None)
        self.head_and_loss(x)
        for layer in reversed(range(self.layers)):
            self.block_backward(inputs[layer], units[layer])
        self.free(self.grad)
        self.adam()
        self.reserved_after.append(self.sim.reserved)

    def run_steps(self, n: int) -> int:
        """Parameters, then ``n`` steps; the reserved high-water mark (what torchtitan
        logs: ``reserved_bytes.all.peak`` after any number of peak resets)."""
        for nbytes in all_params(self.layers):
            self.new(nbytes)
        if not self.lazy:
            self.make_states()
        for _ in range(n):
            self.peak = (0, 0)
            self.train_step()
            self.peaks.append(self.peak)
        return max(self.reserved_after)


class AsyncTp(TwoSteps):
    """The same steps with torchtitan's async TP (9dec370 ``apply_tp`` with
    ``enable_async_tp``: inductor's ``_micro_pipeline_tp`` pass, so only the compiled
    blocks change; the head and the loss stay eager). torch's
    ``distributed/_symmetric_memory`` ``_fused_all_gather_matmul_impl`` gathers into one
    ``ag_out`` through a symmetric-memory workspace (c10d's own mapping, outside the
    caching allocator), and ``_fused_matmul_reduce_scatter_impl`` keeps one
    ``stacked_partials`` (T x h) and reduces it to the shard: inside the blocks, the
    collectives without their dim-1 ``cat`` copies. The published table has this run
    too (71.9 → 67.6 GiB)."""

    compiled = False

    def gather(self, shard: int) -> int:
        if not self.compiled:
            return super().gather(shard)
        return self.new(shard * TP)

    def scatter(self, partial: int) -> int:
        if not self.compiled:
            return super().scatter(partial)
        out = self.new(TL * H * 2)
        self.free(partial)
        return out

    def block(self, x: int, last: bool) -> int:
        self.compiled = True
        out = super().block(x, last)
        self.compiled = False
        return out

    def block_backward(self, inp: int, kept: int | None) -> None:
        self.compiled = True
        super().block_backward(inp, kept)
        self.compiled = False


def main() -> None:
    for expandable in (True, False):
        for lazy in (True, False):
            s = TwoSteps(expandable, lazy)
            high = s.run_steps(3)
            cells = "  ".join(
                f"step {i + 1}: alloc {a / GiB:6.2f} res@peak {r / GiB:6.2f}"
                f" res after {e / GiB:6.2f}"
                for i, ((a, r), e) in enumerate(zip(s.peaks, s.reserved_after, strict=True))
            )
            print(
                f"expandable {'on ' if expandable else 'off'}"
                f" states {'lazy  ' if lazy else 'before'}"
                f"  {cells}  high-water {high / GiB:6.2f}"
            )
        tp = AsyncTp(expandable, lazy=True).run_steps(3)
        print(f"  async TP (states lazy): high-water {tp / GiB:6.2f}")


if __name__ == "__main__":
    main()
