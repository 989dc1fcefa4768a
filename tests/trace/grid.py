"""Traced cases for the fidelity harness: tiny models of every family, any stack.

Shared by the CI grid (``tests/trace/test_grid.py``) and the offline table
(``tests/fidelity_grid.py``). A case is a plan: a family's preset shrunk to a tiny
shape (its quirks kept: biases, norms, fused projections, experts, MLA) with the stack
axes applied as ``--set``-style changes. :func:`measure` traces it and lines it up with
the ledger: the peak against the estimate's range, each ledger group at the peak, and
the persistent model states, which must agree exactly.

To add a family: give it a preset in :data:`FAMILY_PRESET`; to add an axis value, a
dict of changes in :data:`AXES`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from engine.estimate import Estimate, estimate
from engine.models.inventory import build_inventory
from engine.models.presets import load_preset
from engine.models.spec import ArchitectureSpec
from engine.plan import Plan, with_values
from engine.trace.compare import compare, unseen
from engine.trace.result import TraceResult

FAMILY_PRESET: dict[str, str] = {
    "llama": "llama-3.2-1b",
    "llama_untied": "llama-3.1-8b",
    "mistral": "mistral-7b",
    "qwen2": "qwen2.5-0.5b",
    "qwen3": "qwen3-8b",
    "gemma2": "gemma-2-2b",
    "gemma3": "gemma-3-1b",
    "phi3": "phi-3-mini",
    "gpt2": "gpt2",
    "gpt_neox": "pythia-6.9b",
    "mixtral": "mixtral-8x7b",
    "qwen3_moe": "qwen3-30b-a3b",
    "deepseek_v3": "deepseek-v3",
    "olmo2": "olmo-2-7b",
    "granite": "granite-3.1-2b",
    "cohere": "command-r-plus-104b",
    "cohere2": "command-r7b",
    "starcoder2": "starcoder2-3b",
    "stablelm": "stablelm-2-1.6b",
    "stablelm_parallel": "stablelm-2-12b",
    "falcon": "falcon-7b",
    "falcon_new": "falcon-40b",
    "qwen2_moe": "qwen1.5-moe-a2.7b",
    "granitemoe": "granite-3.1-1b-a400m",
    "phimoe": "phi-3.5-moe",
    "deepseek_v2": "deepseek-v2-lite",
}
"""Family key → the preset whose quirks its tiny model keeps."""

_MHA = frozenset({"gpt2", "gpt_neox", "phi3"})


def tiny_arch(
    family: str, hidden: int = 256, layers: int = 2, vocab: int = 2048
) -> ArchitectureSpec:
    """The family's preset at a tiny shape: 4 heads of 64, 2 KV heads (MHA families
    keep all 4), intermediate 2 × hidden, experts 8 of width 128 (top-2: 8 so that
    FSDP2 over 8 ranks splits whole experts, as at published sizes)."""
    _, arch = load_preset(FAMILY_PRESET[family])
    heads = 4
    update: dict[str, Any] = {
        "hidden": hidden,
        "layers": layers,
        "heads": heads,
        "kv_heads": heads if arch.family in _MHA else 2,
        "head_dim": None if arch.head_dim is None else hidden // heads,
        "intermediate": 2 * hidden,
        "vocab": vocab,
        "max_position": 1024,
        "mtp_layers": 0,
    }
    if arch.moe is not None:
        update["moe"] = arch.moe.model_copy(
            update={
                "num_experts": 8,
                "top_k": 2,
                "expert_intermediate": 128,
                "shared_intermediate": None if arch.moe.shared_intermediate is None else 128,
                "first_dense_layers": min(arch.moe.first_dense_layers, 1),
                "dense_intermediate": None,
            }
        )
    if arch.mla is not None:
        update["mla"] = arch.mla.model_copy(
            update={
                "q_lora_rank": 64,
                "kv_lora_rank": 32,
                "qk_nope_head_dim": 32,
                "qk_rope_head_dim": 16,
                # = the q/k head dim, so CPU SDPA takes its flash kernel: with unequal
                # dims it falls back to the fp32 math path (CUDA to memory-efficient,
                # which keeps the same tensors as flash)
                "v_head_dim": 48,
            }
        )
        update["kv_heads"] = heads
    return ArchitectureSpec.model_validate({**arch.model_dump(), **update})


AXES: dict[str, dict[str, dict[str, Any]]] = {
    "strategy": {
        "plain": {"parallelism.strategy": "ddp", "parallelism.dp": 1},
        "ddp2": {"parallelism.strategy": "ddp", "parallelism.dp": 2},
        "fsdp4": {"parallelism.strategy": "fsdp2", "parallelism.dp": 4},
        "fsdp8": {"parallelism.strategy": "fsdp2", "parallelism.dp": 8},
        "fsdp4_noreshard": {
            "parallelism.strategy": "fsdp2",
            "parallelism.dp": 4,
            "parallelism.knobs.fsdp_reshard_after_forward": False,
        },
        "hsdp2x2": {
            "parallelism.strategy": "fsdp2_hsdp",
            "parallelism.dp": 4,
            "parallelism.shard_group_size": 2,
        },
        "tp2": {"parallelism.strategy": "ddp", "parallelism.dp": 1, "parallelism.tp": 2},
        "fsdp2_tp2": {"parallelism.strategy": "fsdp2", "parallelism.dp": 2, "parallelism.tp": 2},
    },
    "method": {
        "full": {"method.kind": "full"},
        "lora": {"method.kind": "lora", "method.lora.rank": 8},
        "lora_mlp": {
            "method.kind": "lora",
            "method.lora.rank": 8,
            "method.lora.targets": ["q", "v", "gate", "up", "down"],
        },
    },
    "precision": {
        "fp32": {"method.precision.policy": "fp32", "method.precision.compute_dtype": "fp32"},
        "bf16": {
            "method.precision.policy": "pure_16bit",
            "method.precision.compute_dtype": "bf16",
            "method.precision.grad_dtype": "bf16",
            "method.precision.optimizer_state_dtype": "bf16",
        },
        "mixed": {"method.precision.policy": "autocast", "method.precision.compute_dtype": "bf16"},
    },
    "optimizer": {
        "adamw": {"method.optimizer.name": "adamw", "method.optimizer.implementation": "foreach"},
        "adamw_fused": {
            "method.optimizer.name": "adamw",
            "method.optimizer.implementation": "fused",
        },
        "adamw_loop": {
            "method.optimizer.name": "adamw",
            "method.optimizer.implementation": "for_loop",
        },
        "sgd": {"method.optimizer.name": "sgd"},
        "sgd_momentum": {"method.optimizer.name": "sgd_momentum"},
        "adafactor": {"method.optimizer.name": "adafactor"},
    },
    "recompute": {
        "none": {"method.recompute.policy": "none"},
        "full": {"method.recompute.policy": "full"},
        "every2": {"method.recompute.policy": "every_k", "method.recompute.every_k": 2},
    },
}
"""Each axis: value name → the plan changes that select it."""

DEFAULTS: dict[str, str] = {
    "strategy": "plain",
    "method": "full",
    "precision": "bf16",
    "optimizer": "adamw",
    "recompute": "none",
}


@dataclass(frozen=True)
class Case:
    """One traced configuration: a family and one value per axis."""

    family: str
    axes: dict[str, str] = field(default_factory=dict)
    seq_len: int = 256
    micro_batch: int = 1
    grad_accum: int = 1

    @property
    def name(self) -> str:
        values = {**DEFAULTS, **self.axes}
        extra = f"-ga{self.grad_accum}" if self.grad_accum > 1 else ""
        return f"{self.family}-" + "-".join(values[a] for a in DEFAULTS) + extra

    def plan(self) -> Plan:
        values = {**DEFAULTS, **self.axes}
        arch = tiny_arch(self.family)
        changes: dict[str, Any] = {
            "model.name": f"tiny {self.family}",
            "model.preset": None,
            "model.architecture": arch.model_dump(mode="json"),
            "batch.seq_len": self.seq_len,
            "batch.micro_batch": self.micro_batch,
            "batch.grad_accum": self.grad_accum,
            "runtime.attention": "eager" if arch.family == "gemma2" else "sdpa_flash",
        }
        for axis, value in values.items():
            changes.update(AXES[axis][value])
        return with_values(Plan(), changes)


class PlanCase(Protocol):
    """What :class:`Measured` needs of a case: its name and its plan."""

    @property
    def name(self) -> str: ...

    def plan(self) -> Plan: ...


@dataclass(frozen=True)
class Measured:
    """A traced case against its estimate."""

    case: PlanCase
    result: TraceResult
    est: Estimate

    @property
    def traced(self) -> int:
        return self.result.peak_bytes

    @property
    def low(self) -> int:
        """The ledger's low end less the cuBLAS workspaces, which no fake-tensor trace
        allocates (``engine.trace.compare.unseen``)."""
        return self.est.peak.low - unseen(self.est.heaviest)[0]

    @property
    def high(self) -> int:
        return self.est.peak.high - unseen(self.est.heaviest)[1]

    @property
    def inside(self) -> bool:
        return self.low <= self.traced <= self.high

    @property
    def mid_error_percent(self) -> float:
        """(ledger mid − traced) ÷ traced."""
        return 100.0 * ((self.low + self.high) / 2 - self.traced) / self.traced

    def group_errors(self) -> dict[str, float | None]:
        """Each ledger group's (mid − traced) ÷ traced at the peak, in percent."""
        return {g.name: g.error_percent for g in compare(self.result, self.est).groups}

    def ledger_states(self) -> dict[str, int]:
        """The ledger's persistent weights, gradients and optimizer state (exact rows)."""
        out = {"params": 0, "grads": 0, "optimizer_state": 0}
        key = {"weights": "params", "gradients": "grads", "optimizer": "optimizer_state"}
        for r in self.est.rows:
            if r.location == "hbm" and r.kind == "persistent" and r.group in key:
                out[key[r.group]] += r.low
        return out

    def traced_states(self) -> dict[str, int]:
        ms = self.result.model_states
        return {k: ms[k] for k in ("params", "grads", "optimizer_state")}

    def states_verdict(self) -> str:
        """``ok`` when the model states equal the ledger's; ``ok*`` when only FSDP2's
        gradients differ, by less than its per-tensor rounding (one flat reduce-scatter
        buffer per unit, see ``test_grid.py``); else ``DIFF``."""
        traced, ledger = self.traced_states(), self.ledger_states()
        if traced == ledger:
            return "ok"
        plan = self.case.plan()
        tensors = len(build_inventory(plan.model.architecture))
        rounding_only = (
            plan.parallelism.strategy.startswith("fsdp2")
            and traced["params"] == ledger["params"]
            and traced["optimizer_state"] == ledger["optimizer_state"]
            and 0 <= ledger["grads"] - traced["grads"] < 512 * tensors
        )
        return "ok*" if rounding_only else "DIFF"


def measure(case: Case, steps: int = 2) -> Measured:
    """Trace the case and estimate it."""
    from engine.trace.runner import TraceOptions, trace_plan

    plan = case.plan()
    return Measured(case, trace_plan(plan, TraceOptions(steps=steps)), estimate(plan))
