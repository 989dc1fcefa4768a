"""Megatron-LM command-line arguments from a plan (``megatron/training/arguments.py``).

One ``--flag value`` per line so the block pastes into a launch script; boolean flags
stand alone. :func:`parse_args` reads the block back (for round trips and checks).
"""

from __future__ import annotations

from typing import Any

from engine.exports.common import Export, global_batch
from engine.plan import Plan
from engine.stacks.defaults import resolved
from engine.stacks.families import family_of


def megatron_args(plan: Plan) -> tuple[dict[str, Any], list[str]]:
    """Flag → value (True for a bare flag), and notes."""
    plan = resolved(plan)  # fields left to the training stack take its defaults
    par, b, arch, prec = (
        plan.parallelism,
        plan.batch,
        plan.model.architecture,
        plan.method.precision,
    )
    notes: list[str] = []
    a: dict[str, Any] = {
        "--num-layers": arch.layers,
        "--hidden-size": arch.hidden,
        "--ffn-hidden-size": arch.intermediate,
        "--num-attention-heads": arch.heads,
        "--seq-length": b.seq_len,
        "--max-position-embeddings": max(arch.max_position, b.seq_len),
        "--micro-batch-size": b.micro_batch,
        "--global-batch-size": global_batch(plan),
        "--tensor-model-parallel-size": par.tp,
        "--pipeline-model-parallel-size": par.pp,
        "--context-parallel-size": par.cp,
        "--expert-model-parallel-size": par.ep,
        "--expert-tensor-parallel-size": par.expert_tp,
    }
    if arch.kv_heads != arch.heads:
        a["--group-query-attention"] = True
        a["--num-query-groups"] = arch.kv_heads
    if arch.mlp == "swiglu":
        a["--swiglu"] = True
    if arch.norm == "rmsnorm":
        a["--normalization"] = "RMSNorm"
    if arch.position == "rotary":
        a["--position-embedding-type"] = "rope"
    if not arch.tied_embeddings:
        a["--untie-embeddings-and-output-weights"] = True
    if par.virtual_stages > 1:
        a["--num-layers-per-virtual-pipeline-stage"] = arch.layers // (par.pp * par.virtual_stages)
    if par.pp_layer_split is not None and len(set(par.pp_layer_split)) > 1:
        split = par.pp_layer_split
        a["--decoder-first-pipeline-num-layers"] = split[0]
        a["--decoder-last-pipeline-num-layers"] = split[-1]
        if len(set(split[1:-1])) > 1:
            notes.append(f"uneven middle stages {split[1:-1]} need a custom layout")
    if par.sequence_parallel:
        a["--sequence-parallel"] = True
    family = family_of(par.strategy)
    if family == "megatron":
        a["--use-distributed-optimizer"] = True
    elif family != "ddp":
        notes.append(f"strategy {par.strategy} has no Megatron-LM flag; exported as DDP")
    if prec.compute_dtype in ("bf16", "fp16"):
        a[f"--{prec.compute_dtype}"] = True
    rc = plan.method.recompute.policy
    if rc == "full":
        a.update(
            {
                "--recompute-granularity": "full",
                "--recompute-method": "uniform",
                "--recompute-num-layers": 1,
            }
        )
    elif rc == "selective":
        a["--recompute-granularity"] = "selective"
    if plan.offload.optimizer != "none":
        notes.append("optimizer offload: Megatron's --optimizer-cpu-offload (Megatron-Core)")
    return a, notes


def to_text(args: dict[str, Any]) -> str:
    lines = [k if v is True else f"{k} {v}" for k, v in args.items()]
    return " \\\n".join(lines) + "\n"


def parse_args(text: str) -> dict[str, Any]:
    """Read ``--flag value`` tokens back: ints where they parse, True for bare flags."""
    tokens = [t for t in text.replace("\\\n", " ").split() if t != "\\"]
    out: dict[str, Any] = {}
    i = 0
    while i < len(tokens):
        key = tokens[i]
        if not key.startswith("--"):
            raise ValueError(f"expected a --flag, got {key!r}")
        if i + 1 < len(tokens) and not tokens[i + 1].startswith("--"):
            raw = tokens[i + 1]
            out[key] = int(raw) if raw.lstrip("-").isdigit() else raw
            i += 2
        else:
            out[key] = True
            i += 1
    return out


def export_megatron(plan: Plan) -> Export:
    args, notes = megatron_args(plan)
    return Export("megatron", "megatron_args.txt", to_text(args), tuple(notes))
