"""The optimizer step's temporaries on the GPU (``hbm.optimizer_step.*``): the torch
optimizers' own (measured for PyTorch's AdamW, torch 2.13) and the fp32 gradient
partition DeepSpeed builds for the step. Live only in the optimizer phase."""

from __future__ import annotations

import re
from functools import partial
from itertools import starmap
from operator import mul

from engine.ledger.held import HeldTensor
from engine.ledger.peaks.adafactor_step import adafactor_temp_rows
from engine.ledger.peaks.step_temporaries import step_temporaries_row
from engine.ledger.peaks.torchao_step import compiled_step, torchao_step_rows
from engine.ledger.precision import DTYPE_BYTES
from engine.ledger.row import OPTIMIZER, Row, make_row
from engine.ledger.states.allocs import one_per_tensor, shard_allocs
from engine.plan import Plan
from engine.stacks.families import StrategyRule
from engine.units import fmt_count, round_up


def optimizer_temp_rows(plan: Plan, held: list[HeldTensor], rule: StrategyRule) -> list[Row]:
    """The optimizer step's temporaries (none when it runs off the GPU, fused, or for
    optimizers without them; torchao's 8-bit AdamW: :mod:`torchao_step`)."""
    opt = plan.method.optimizer
    off_gpu = plan.offload.optimizer != "none" or plan.offload.params != "none"
    if compiled_step(opt) and not off_gpu:
        return torchao_step_rows(opt, held, rule, plan.runtime.allocation_granularity_bytes)
    if off_gpu or opt.implementation == "fused" or opt.name in ("adam8bit", "sgd"):
        return []
    if opt.name == "adafactor":
        return adafactor_temp_rows(plan, held, rule)
    trainable = [t for t in held if t.trainable]
    if not trainable:
        return []
    gran = plan.runtime.allocation_granularity_bytes
    if opt.implementation == "foreach":
        hf = plan.stack.name == "hf_trainer"
        keyed: dict[tuple[bool, str], list[HeldTensor]] = {}
        for t in trainable:  # param group (HF: decay, no-decay), then dtype bucket
            keyed.setdefault((hf and no_decay(t.name), t.state_dtype), []).append(t)
        totals = {k: sum(starmap(mul, _sized(ts, rule, gran)[0])) for k, ts in keyed.items()}
        n, groups = foreach_peak(totals)
        dtypes = "/".join(sorted({d for _, d in totals}))
        formula = (
            f"foreach: one {dtypes} copy of the largest parameter group's (sharded) "
            f"tensors, {groups}"
        )
    else:
        # Tensor order within a layer repeats across layers, so one layer's sequence (plus
        # the previous layer's last tensor before its first) gives the same maximum.
        n = loop_peak(_sized(trainable, rule, gran)[0])
        formula = "for-loop: max over tensors of 2·size(p_i) + size(p_(i−1))"
    low = n if opt.name == "adamw" else 0
    note = "" if opt.name == "adamw" else " (measured for AdamW only: low 0)"
    return [step_temporaries_row(low, n, partial(_formula, formula, n, note), "torch-adamw")]


def _sized(
    trainable: list[HeldTensor], rule: StrategyRule, gran: int
) -> tuple[list[tuple[int, int]], str]:
    """The optimizer's allocations of these tensors as (bytes, copies), and their dtypes."""
    sharded = rule.optimizer
    if one_per_tensor(rule, sharded):  # the allocations are the tensors' shards
        g = gran if gran > 1 else 1  # round_up's rule
        sized = []
        for t in trainable:  # shard_numel and round_up inlined (once per tensor and layout)
            n = t.group if sharded else 1
            if n == 1:
                numel = t.numel
            else:
                d0 = t.shape[0]
                numel = -(-d0 // n) * (t.numel // d0) if d0 else 0
            sized.append((-(-numel * DTYPE_BYTES[t.state_dtype] // g) * g, t.count))
        return sized, "/".join(sorted({t.state_dtype for t in trainable}))
    allocs = shard_allocs(trainable, sharded, rule, "state_dtype")
    sized = [(round_up(a.numel * DTYPE_BYTES[a.dtype], gran), a.copies) for a in allocs]
    return sized, "/".join(sorted({a.dtype for a in allocs}))


NO_DECAY = re.compile(r"bias|layernorm|rmsnorm|(?:^|\.)norm(?:$|\.)|_norm(?:$|\.)")
"""transformers ``Trainer.get_decay_parameter_names``' forbidden name patterns: those
parameters go to the second (``weight_decay = 0``) group."""


def no_decay(name: str) -> bool:
    """Whether HF Trainer puts the parameter in its no-decay group (norms, biases)."""
    return NO_DECAY.search(name.lower()) is not None


def foreach_peak(totals: dict[tuple[bool, str], int]) -> tuple[int, str]:
    """The foreach step's peak from the bytes of each (no-decay group, dtype) bucket, in
    the order torch meets them, and the buckets in words.

    torch ``optim/adam.py`` ``_multi_tensor_adam`` runs once per param group (HF
    Trainer's two: decay, then no-decay — ``Trainer.create_optimizer``; a plain script's
    and torchtitan's one), and inside it per (device, dtype) bucket
    (``_group_tensors_by_device_and_dtype``): ``exp_avg_sq_sqrt =
    torch._foreach_sqrt(...)`` allocates one copy of the bucket's tensors, and the
    previous bucket's list is still bound while the next is made (no ``del``); it is
    freed when the group's call returns. So the peak is the largest group's largest
    sum of two consecutive buckets (one bucket: its size)."""
    peak = 0
    for group in (False, True):
        prev = 0
        for (g, _), b in totals.items():
            if g == group:
                peak = max(peak, b + prev)
                prev = b
    two = any(g for g, _ in totals)
    words = " + ".join(
        f"{('no-decay' if g else 'decay') if two else 'one group'} {d} {fmt_count(b)} B"
        for (g, d), b in totals.items()
    )
    return peak, words


def loop_peak(sized: list[tuple[int, int]]) -> int:
    """The for-loop step's peak over allocations of (bytes, copies): the largest
    2·size(p_i) + size(p_(i−1)) along the sequence in which each allocation appears
    min(copies, 2) times (a folded layer's second copy follows its first), in one pass;
    0 when there is none. Sizes are never negative."""
    n = prev = 0
    for size, count in sized:
        if count < 1:
            continue
        n = max(n, 2 * size + prev, 3 * size if count > 1 else 0)
        prev = size
    return n


def _formula(head: str, n: int, note: str) -> str:
    """The step temporaries' formula, written when read: ``head`` = bytes, and ``note``."""
    return f"{head} = {fmt_count(n)} B{note}"


def deepspeed_step_rows(plan: Plan, held: list[HeldTensor], rule: StrategyRule) -> list[Row]:
    """The fp32 gradient partition a ZeRO step builds on the GPU.

    DeepSpeed 0.19.6 stage_1_and_2.py ``step``: ``flat_grad_partition =
    self.flatten(self.averaged_gradients[i])`` copies the 16-bit gradients of the
    partition into one buffer, ``.to(fp32)`` makes ``single_grad_partition`` from it
    (while both exist), then the 16-bit gradients are freed and the optimizer steps with
    the fp32 one. ZeRO-3 (stage3.py ``_prepare_fp32_grad_for_sub_group``) does the same
    one sub-group at a time: parameters' partitions are grouped until a group reaches
    ``sub_group_size`` elements (``_create_fp16_sub_groups``), so a group holds up to
    one partition more. With ZeRO-Offload the fp32 gradient is on the host instead.

    Before that, ZeRO-1/2's ``step`` computes the gradient norm (``scaled_global_norm`` →
    ``get_grad_norm_direct``: ``torch.linalg.vector_norm(g.data.double())`` for each
    gradient of the partition, one at a time, freed before the flatten): the moment's
    temporary is the larger of the two, the fp64 copy of the largest gradient piece in
    the partition (≤ the partition) or the flatten and its fp32 copy (source review R6).

    With fp16 gradients the loss scaler's overflow check runs first, alone (R12;
    ``check_grad_overflow`` is on for fp16 only, runtime/engine.py
    ``_configure_zero_optimizer``): ZeRO-1/2's ``has_overflow_partitioned_grads_serial``
    calls ``_has_inf_or_nan`` on each gradient piece — ``x.float()``, ``isnan``,
    ``isinf``, ``logical_or`` and its ``.float()``, all alive at once: 4 + 1 + 1 + 1 + 4 B
    an element of the largest piece; ZeRO-3's ``has_overflow`` runs
    ``torch.isinf(grad_partitions_flat_buffer).any()`` (then ``isnan``): 1 B an element
    of the rank's partition.
    """
    if rule.family != "deepspeed" or plan.offload.optimizer != "none":
        return []
    trainable = [t for t in held if t.trainable]
    if not trainable:
        return []
    gran = plan.runtime.allocation_granularity_bytes
    allocs = shard_allocs(trainable, rule.optimizer, rule, "grad_dtype")
    numel = sum(a.numel * a.copies for a in allocs)
    gbytes = max(DTYPE_BYTES[a.dtype] for a in allocs)
    low_el = high_el = numel
    group = ""
    if rule.params:
        sub = plan.offload.sub_group_size
        largest = max(-(-t.numel // t.group) for t in trainable)
        low_el, high_el = min(numel, sub), min(numel, sub + largest)
        group = f" of one sub-group (sub_group_size {fmt_count(sub)}, + up to one partition)"
    per = gbytes + (4 if gbytes != 4 else 0)
    low, high = round_up(low_el * per, gran), round_up(high_el * per, gran)
    copy = " + its fp32 copy × 4 B" if gbytes != 4 else " (already fp32: no copy)"
    if not rule.params:  # R6: the norm's fp64 copy comes first, alone (see the docstring)
        piece = min(max(t.numel for t in trainable), numel)
        norm = round_up(piece * 8, gran)
        if norm > high:
            copy += f"; the norm's fp64 copy of a {fmt_count(piece)}-el. gradient is larger"
        low, high = max(low, norm), max(high, norm)
    if any(a.dtype == "fp16" for a in allocs):  # R12 (see the docstring)
        piece = numel if rule.params else min(max(t.numel for t in trainable), numel)
        wide = 0 if rule.params else 2 * round_up(piece * 4, gran)
        check = wide + round_up(piece, gran) * (1 if rule.params else 3)
        if check > high:
            copy += f"; the fp16 overflow check of a {fmt_count(piece)}-el. piece is larger"
        low, high = max(low, check), max(high, check)
    return [
        make_row(
            id="hbm.optimizer_step.fp32_grad_partition",
            label="ZeRO step: flattened and fp32 gradient partition",
            state="optimizer_step",
            location="hbm",
            kind="peak",
            group="temporaries",
            low=low,
            high=high,
            formula=f"flatten(averaged_gradients){group}: {fmt_count(low_el)}–"
            f"{fmt_count(high_el)} el. × {gbytes} B{copy} = {fmt_count(low)}–"
            f"{fmt_count(high)} B",
            source="deepspeed-zero3-buffers" if rule.params else "deepspeed-zero12-step",
            phases=OPTIMIZER,
        )
    ]
