"""Replay torchtitan's Llama-3.1-70B 2D step (FSDP 32 × TP 8, SP, Float8, compile, full AC,
s 8192, local batch 16: the published 2D row) through the allocator simulator — a script,
not a test.

    PYTHONPATH=. .venv/bin/python tests/titan_2d_replay.py

``memplan trace`` refuses sequence parallelism, so the compute stream's requests are
written out here by hand, per rank, from the code the run used (torchtitan 9dec370
``parallelisms/parallelize_llama.py`` ``apply_tp`` / ``apply_ac`` / ``apply_compile``,
``train.py``, ``models/norms.py``; torch's ``_functional_collectives.all_gather_tensor`` /
``reduce_scatter_tensor``, whose gather / scatter dim 1 costs a ``cat`` copy; DTensor's
``loss_parallel`` ops in ``tensor/parallel/loss.py``). A block's forward under FullAC
keeps only its input; its requests follow the eager op order with every buffer freed at
its last use (inductor's own reuse and order are not known here: that is this replay's
uncertainty). FSDP2's side streams (all-gather, reduce-scatter) are left out: the
ledger's pools count them. Requests under 1 MiB are omitted. It prints peak allocated
and the reserved then, with and without ``expandable_segments`` and with and without
the dim-1 ``cat`` copies, for comparison with the ledger's compute-stream reserve
(fragmentation × transient + the freed blocks at the loss).
"""

from __future__ import annotations

import sys
from itertools import count
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from engine.allocator.rules import AllocatorConfig
from engine.allocator.simulator import Simulator
from engine.units import GiB

TP, T, H = 8, 16 * 8192, 8192
TL = T // TP  # the sequence shard under SP
Q, KV, INTER, VOCAB = 8192 // TP, 1024 // TP, 28_672 // TP, 128_256 // TP
UNIT = 213_942_272  # one block's unsharded bf16 parameters on this rank (hbm.gathered.layers)
SHARD = 1_102_545_920  # this rank's fp32 parameters, and each AdamW moment


class Step:
    """One training step's compute-stream requests into a simulator."""

    def __init__(self, expandable: bool, cat: bool) -> None:
        self.sim = Simulator(AllocatorConfig(expandable_segments=expandable))
        self.cat = cat
        self.ids = count(1)
        self.peak = (0, 0)

    def new(self, nbytes: int) -> int:
        i = next(self.ids)
        self.sim.malloc(i, nbytes)
        if self.sim.allocated > self.peak[0]:
            self.peak = (self.sim.allocated, self.sim.reserved)
        return i

    def free(self, *blocks: int) -> None:
        for b in blocks:
            self.sim.free(b)

    def gather(self, shard: int) -> int:
        """An SP all-gather along dim 1: the collective's buffer, then its ``cat``."""
        raw = self.new(shard * TP)
        if not self.cat:
            return raw
        out = self.new(shard * TP)
        self.free(raw)
        return out

    def scatter(self, partial: int) -> int:
        """A reduce-scatter along dim 1 of ``partial``: its ``cat`` copy, the output."""
        src = partial
        if self.cat:
            src = self.new(T * H * 2)
            self.free(partial)
        out = self.new(TL * H * 2)
        self.free(src)
        return out

    def block(self, x: int, last: bool) -> int:
        """One checkpointed block's forward (Float8 linears: fp8 inputs, bf16 outputs)."""
        unit = self.new(UNIT)
        n1 = self.new(TL * H * 2)
        n1f = self.new(TL * H)
        self.free(n1)
        g1 = self.gather(TL * H)
        self.free(n1f)
        q, k, v = self.new(T * Q * 2), self.new(T * KV * 2), self.new(T * KV * 2)
        self.free(g1)
        qr, kr = self.new(T * Q * 2), self.new(T * KV * 2)
        self.free(q, k)
        o = self.new(T * Q * 2)
        self.free(qr, kr, v)
        of = self.new(T * Q)
        self.free(o)
        h1 = self.new(TL * H * 2)
        rs = self.scatter(self.new(T * H * 2))
        self.free(of, rs)
        n2 = self.new(TL * H * 2)
        n2f = self.new(TL * H)
        self.free(n2)
        g2 = self.gather(TL * H)
        self.free(n2f)
        w1, w3 = self.new(T * INTER * 2), self.new(T * INTER * 2)
        self.free(g2)
        p = self.new(T * INTER * 2)
        self.free(w1, w3)
        pf = self.new(T * INTER)
        self.free(p)
        out = self.new(TL * H * 2)
        rs2 = self.scatter(self.new(T * H * 2))
        self.free(pf, rs2, h1)
        if not last:
            self.free(unit)
        del x
        return out

    def run(self) -> tuple[int, int]:
        for _ in range(3):  # fp32 parameters, exp_avg, exp_avg_sq
            self.new(SHARD)
        x = self.new(TL * H * 2)  # the embedding's output shard
        for layer in range(80):
            x = self.block(x, layer == 79)
        # final norm (eager, torchtitan RMSNorm): fp32 upcast and type_as output kept
        self.new(TL * H * 4)
        sq = self.new(TL * H * 4)
        self.free(sq)
        normed = self.new(TL * H * 2)
        out = self.new(TL * H * 2)
        self.gather(TL * H * 2)  # the output projection's input, kept
        self.free(out)
        del normed
        self.free(self.loss_forward())
        return self.peak

    def loss_forward(self) -> int:
        """``loss_parallel``'s forward on this rank's T × V/8 logits: the bf16 logits,
        their fp32 upcast and shifted copy, the exponentials, the kept fp32 result and
        the reductions' temporaries, in request order. Returns the result's block (kept
        for the loss's backward; the caller frees it)."""
        pred = self.new(T * VOCAB * 2)
        up, shifted = self.new(T * VOCAB * 4), self.new(T * VOCAB * 4)
        e = self.new(T * VOCAB * 4)
        self.free(e)
        result = self.new(T * VOCAB * 4)
        self.free(shifted, up, pred)
        zeros, ex = self.new(T * VOCAB * 4), self.new(T * VOCAB * 4)
        total = self.new(T * VOCAB * 4)
        self.free(ex)
        prod = self.new(T * VOCAB * 4)
        self.free(zeros, total, prod)
        return result


def main() -> None:
    for cat in (True, False):
        for expandable in (True, False):
            alloc, res = Step(expandable, cat).run()
            print(
                f"cat copies {'on ' if cat else 'off'}  expandable {'on ' if expandable else 'off'}"
                f"  peak allocated {alloc / GiB:6.2f} GiB  reserved then {res / GiB:6.2f}"
                f"  reserved - allocated {(res - alloc) / GiB:5.2f}"
            )


if __name__ == "__main__":
    main()
