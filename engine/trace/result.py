"""What a trace measured: the steady step's peak, its breakdown and every phase.

Pure data (no torch), so the CLI, the record store and the tests can read a result
without the extra installed. Categories are the trackers' own, under the names the
shared reference cases use (``shared/reference/measured/README.md``), plus
``grad_buckets`` for DDP's all-reduce buckets; :data:`CATEGORY_GROUP` maps them onto the
ledger's row groups in one table.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from engine.trace.alloc_log import AllocEvent
from engine.validation.categories import REFERENCE_CATEGORY_GROUP

CATEGORIES: tuple[str, ...] = (
    "params",
    "params_unsharded",
    "all_gather",
    "grads",
    "grads_unsharded",
    "reduce_scatter",
    "grad_buckets",
    "optimizer_state",
    "optimizer_temp",
    "activations",
    "temp",
    "buffers",
    "inputs",
)

CATEGORY_LABELS: dict[str, str] = {
    "params": "parameters (this rank's shard)",
    "params_unsharded": "gathered parameters",
    "all_gather": "all-gather buffers",
    "grads": "gradients (this rank's shard)",
    "grads_unsharded": "unsharded gradients",
    "reduce_scatter": "reduce-scatter buffers",
    "grad_buckets": "DDP gradient buckets",
    "optimizer_state": "optimizer state",
    "optimizer_temp": "optimizer step temporaries",
    "activations": "activations (saved for backward)",
    "temp": "temporaries (backward)",
    "buffers": "buffers",
    "inputs": "inputs (ids, labels)",
}

CATEGORY_GROUP: dict[str, str] = {c: REFERENCE_CATEGORY_GROUP[c] for c in CATEGORIES}
"""Trace category → ledger row group: the one mapping table (see ``records.py`` for
why each category lands where it does)."""

PHASES: tuple[str, ...] = ("forward", "backward", "optimizer", "zero_grad")
"""The phases of one training step, in order (forward and backward repeat per
micro-batch under gradient accumulation)."""


@dataclass(frozen=True, slots=True)
class Snapshot:
    """Bytes live by category at one moment; ``total`` is their sum."""

    by_category: dict[str, int]

    @property
    def total(self) -> int:
        return sum(self.by_category.values())

    def get(self, category: str) -> int:
        return self.by_category.get(category, 0)

    def to_json(self) -> dict[str, int]:
        return {**{c: v for c, v in self.by_category.items() if v}, "total": self.total}

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> Snapshot:
        """The inverse of :meth:`to_json` (``total`` is recomputed, not read)."""
        return cls({str(k): int(v) for k, v in doc.items() if k != "total"})


@dataclass(frozen=True, slots=True)
class PhaseRecord:
    """One phase of one step: its peak (with where it happened) and what it left live."""

    step: int
    micro_batch: int
    phase: str
    peak: Snapshot
    end: Snapshot
    moment: str

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> PhaseRecord:
        peak, end = Snapshot.from_json(doc["peak"]), Snapshot.from_json(doc["end"])
        step, micro = int(doc["step"]), int(doc["micro_batch"])
        return cls(step, micro, str(doc["phase"]), peak, end, str(doc["moment"]))

    def to_json(self) -> dict[str, Any]:
        return {
            "step": self.step,
            "micro_batch": self.micro_batch,
            "phase": self.phase,
            "peak_bytes": self.peak.total,
            "moment": self.moment,
            "peak": self.peak.to_json(),
            "end": self.end.to_json(),
        }


@dataclass(frozen=True, slots=True)
class TraceSetup:
    """What was traced: the stack as built, for the record and the report."""

    family: str
    model_type: str
    world_size: int
    rank: int
    mesh: tuple[int, ...]
    strategy: str
    tracker: str
    steps: int
    micro_batches: int
    attention: str
    param_dtype: str
    compute_dtype: str
    recompute: str
    optimizer: str
    n_params: int
    n_trainable: int
    plan_params: int
    rounding_bytes: int


@dataclass(frozen=True, slots=True)
class TraceResult:
    """A finished trace. The headline figures are the last (steady) step's."""

    setup: TraceSetup
    phases: tuple[PhaseRecord, ...]
    model_states: dict[str, int]
    versions: dict[str, str]
    wall_seconds: float
    notes: tuple[str, ...] = field(default=())
    alloc_events: tuple[AllocEvent, ...] = field(default=(), repr=False)
    """Every allocation and free the trace saw, in order (``alloc_log.py``); kept in
    the record (``alloc_events``), not in :meth:`to_json`'s summary."""

    def steady(self) -> tuple[PhaseRecord, ...]:
        """The phases of the last step (the one with optimizer state already present)."""
        last = self.setup.steps - 1
        return tuple(p for p in self.phases if p.step == last)

    @property
    def peak_phase(self) -> PhaseRecord:
        """The steady step's phase with the largest peak (the first, on a tie)."""
        steady = self.steady()
        return max(steady, key=lambda p: (p.peak.total, -steady.index(p)))

    @property
    def peak_bytes(self) -> int:
        return self.peak_phase.peak.total

    @property
    def saved_activations(self) -> int:
        """Activations held for backward when the steady step's last forward ends."""
        forwards = [p for p in self.steady() if p.phase == "forward"]
        return forwards[-1].end.get("activations") if forwards else 0

    def phase_peaks(self) -> dict[str, PhaseRecord]:
        """Each phase's largest peak within the steady step."""
        out: dict[str, PhaseRecord] = {}
        for p in self.steady():
            if p.phase not in out or p.peak.total > out[p.phase].peak.total:
                out[p.phase] = p
        return out

    @property
    def steady_end(self) -> Snapshot:
        """What stays live between steps: the end of the steady step's zero_grad."""
        return self.steady()[-1].end

    def to_json(self) -> dict[str, Any]:
        """The result as plain JSON (``memplan trace --json``)."""
        s = self.setup
        return {
            "peak_bytes": self.peak_bytes,
            "peak_phase": self.peak_phase.phase,
            "peak_moment": self.peak_phase.moment,
            "peak_breakdown": self.peak_phase.peak.to_json(),
            "saved_activations_after_forward": self.saved_activations,
            "model_states": dict(self.model_states),
            "phases": [p.to_json() for p in self.phases],
            "setup": {**asdict(s), "mesh": list(s.mesh)},
            "versions": dict(self.versions),
            "wall_seconds": round(self.wall_seconds, 3),
            "notes": list(self.notes),
        }

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> TraceResult:
        """A result from :meth:`to_json` (the headline figures are recomputed from the
        phases). Raises ``ValueError`` naming what is missing or malformed."""
        try:
            raw_setup = dict(doc["setup"])
            setup = TraceSetup(**{**raw_setup, "mesh": tuple(raw_setup["mesh"])})
            phases = tuple(PhaseRecord.from_json(p) for p in doc["phases"])
            return cls(
                setup=setup,
                phases=phases,
                model_states={str(k): int(v) for k, v in doc["model_states"].items()},
                versions={str(k): str(v) for k, v in doc.get("versions", {}).items()},
                wall_seconds=float(doc["wall_seconds"]),
                notes=tuple(str(n) for n in doc.get("notes", ())),
            )
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise ValueError(f"not a trace result: {type(exc).__name__}: {exc}") from exc
