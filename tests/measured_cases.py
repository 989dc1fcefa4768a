"""The measured reference cases (../shared/reference/measured) as MemPlan plans.

One place maps a case's inputs to a :class:`Plan`, so the fidelity test, the fidelity
table and the validation suite all compare the same thing. CI checks ``shared/`` out
beside the clone; when it is absent, :func:`load_cases` skips the calling test.

Mapping: precision ``fp32`` → policy fp32 / compute fp32; ``bf16`` → pure_16bit with
bf16 AdamW state; ``bf16_mixed`` → autocast (fp32 params and state, bf16 compute — FSDP2
MixedPrecisionPolicy when sharded, torch.autocast otherwise); ``fsdp`` → strategy fsdp2
over dp = world_size, else ddp with dp = 1; ``ac: full`` → recompute full; LoRA targets
``q_proj`` … → roles q, k, v, o.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.models.spec import ArchitectureSpec
from engine.plan import Plan, with_values

CASES_PATH = (
    Path(__file__).resolve().parents[1].parent / "shared" / "reference" / "measured" / "cases.jsonl"
)

_PRECISION: dict[str, dict[str, Any]] = {
    "fp32": {
        "method.precision.policy": "fp32",
        "method.precision.compute_dtype": "fp32",
        "method.precision.grad_dtype": "fp32",
        "method.precision.optimizer_state_dtype": "fp32",
    },
    "bf16": {
        "method.precision.policy": "pure_16bit",
        "method.precision.compute_dtype": "bf16",
        "method.precision.grad_dtype": "bf16",
        "method.precision.optimizer_state_dtype": "bf16",
    },
    "bf16_mixed": {
        "method.precision.policy": "autocast",
        "method.precision.compute_dtype": "bf16",
        "method.precision.grad_dtype": "fp32",
        "method.precision.optimizer_state_dtype": "fp32",
    },
}
_ATTENTION = {"sdpa": "sdpa_flash", "eager": "eager", "flash_attention_2": "flash_attn"}


@dataclass(frozen=True)
class Case:
    """One measured training step: its inputs and what PyTorch allocated."""

    name: str
    inputs: dict[str, Any]
    lora: dict[str, Any] | None
    peak_bytes: int
    peak_phase: str
    peak_breakdown: dict[str, int]
    saved_activations: int
    phases: list[dict[str, Any]]
    model_states: dict[str, int]

    def phase_peak(self, phase: str, step: int = 1) -> int:
        for p in self.phases:
            if p["phase"] == phase and p["step"] == step:
                return int(p["peak_bytes"])
        raise KeyError(phase)


def load_cases(path: Path = CASES_PATH) -> list[Case]:
    """Every case in ``cases.jsonl``; skips the calling test when the file is absent."""
    if not path.exists():
        import pytest

        pytest.skip(f"measured cases not found at {path}")
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        c = json.loads(line)
        out.append(
            Case(
                name=c["name"],
                inputs=c["inputs"],
                lora=c.get("lora"),
                peak_bytes=int(c["peak_bytes"]),
                peak_phase=c["peak_phase"],
                peak_breakdown={k: int(v) for k, v in c["peak_breakdown"].items()},
                saved_activations=int(c["saved_activations_after_forward"]),
                phases=c["phases"],
                model_states={k: int(v) for k, v in c["model_states"].items()},
            )
        )
    return out


def architecture(case: Case) -> ArchitectureSpec:
    m = case.inputs["model"]
    return ArchitectureSpec(
        family="llama",
        hidden=m["hidden"],
        layers=m["layers"],
        heads=m["heads"],
        kv_heads=m["kv_heads"],
        head_dim=m.get("head_dim"),
        intermediate=m["intermediate"],
        vocab=m["vocab"],
        tied_embeddings=bool(m["tied"]),
    )


def plan_for_case(case: Case) -> Plan:
    """The MemPlan plan of a measured case."""
    i = case.inputs
    fsdp = bool(i["fsdp"])
    changes: dict[str, Any] = {
        "model.name": i["model"]["name"],
        "model.preset": None,
        "model.architecture": architecture(case).model_dump(mode="json"),
        "batch.seq_len": i["seq_len"],
        "batch.micro_batch": i["micro_batch"],
        "batch.grad_accum": 1,
        "parallelism.strategy": "fsdp2" if fsdp else "ddp",
        "parallelism.dp": i["world_size"] if fsdp else 1,
        "parallelism.knobs.fsdp_reshard_after_forward": bool(i["reshard_after_forward"]),
        "method.kind": i["method"],
        "method.optimizer.name": i.get("optimizer", "adamw"),
        "method.optimizer.implementation": i.get("optimizer_impl", "foreach"),
        "method.recompute.policy": "full" if i["ac"] == "full" else "none",
        "runtime.attention": _ATTENTION.get(i.get("attn", "sdpa"), "sdpa_flash"),
        "runtime.activation_profile": "hf-transformers",
        # fake-tensor steps never call cuBLAS, so no workspace was allocated (a real
        # CUDA step holds two: engine/stacks/blas_workspace.py)
        "runtime.cublas_workspace_bytes": {"low": 0, "high": 0},
        **_PRECISION[i["precision"]],
    }
    if case.lora:
        changes["method.lora.rank"] = case.lora["r"]
        changes["method.lora.alpha"] = float(case.lora["alpha"])
        changes["method.lora.dropout"] = float(case.lora.get("dropout", 0.0))
        changes["method.lora.targets"] = [t.removesuffix("_proj") for t in case.lora["targets"]]
    return with_values(Plan(), changes)
