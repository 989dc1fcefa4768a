"""The per-node ledgers — host RAM, NVMe — the job's checkpoint storage, with fit, and the
step's communication (a section of its own: bytes and a time floor, never HBM).

A plan that fits HBM but not host RAM does not fit: each ledger gets its own verdict
against its own capacity, and the plan's verdict is the worst of them.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from engine.ledger.nodes.checkpoint_storage import checkpoint_rows
from engine.ledger.nodes.communication import Communication, step_communication, still_communication
from engine.ledger.nodes.host import host_rows, pinned_bytes
from engine.ledger.nodes.node_view import NodeView, node_view
from engine.ledger.nodes.nvme import nvme_rows
from engine.ledger.nodes.transfers import Transfers, step_transfers
from engine.ledger.row import PHASES, Row
from engine.ledger.shape_free import free_memo, shape_free
from engine.plan import Plan
from engine.stacks.defaults import require_resolved


@dataclass(frozen=True, slots=True)
class NodeLedgers:
    """Host RAM and NVMe per node (the busiest), and checkpoint storage for the job."""

    view: NodeView
    host: tuple[Row, ...]
    nvme: tuple[Row, ...]
    checkpoint: tuple[Row, ...]
    transfers: Transfers
    host_capacity: int
    nvme_capacity: int
    # the communication when worked out already (no stage moves activations), else None
    kept_communication: Communication | None = None
    moving: Plan | None = None  # the plan whose communication moves activations, else None

    @property
    def communication(self) -> Communication | None:
        """The step's communication (None: not asked for, the layout search). A plan
        whose stages move activations reads the micro-batch's shape there: its
        communication is worked out from ``moving`` when a view reads it, as no verdict
        does (every fresh estimate of a pipeline spent ~a quarter of its time on it)."""
        if self.moving is not None:
            return step_communication(self.moving)
        return self.kept_communication

    @staticmethod
    def _peak(rows: tuple[Row, ...]) -> tuple[int, int]:
        best = (0, 0)
        for ph in PHASES:
            live = [r for r in rows if r.live_in(ph)]
            cand = (sum(r.low for r in live), sum(r.high for r in live))
            best = max(best, cand, key=lambda c: (c[1], c[0]))
        return best

    @property
    def host_peak(self) -> tuple[int, int]:
        return self._peak(self.host)

    @property
    def nvme_peak(self) -> tuple[int, int]:
        return self._peak(self.nvme)

    @property
    def checkpoint_peak(self) -> tuple[int, int]:
        return self._peak(self.checkpoint)

    @property
    def pinned(self) -> int:
        return pinned_bytes(list(self.host))

    def problems(self) -> list[str]:
        """Reasons the node ledgers do not fit (empty when they do)."""
        out = []
        if self.host_peak[1] > self.host_capacity:
            out.append(
                f"host RAM per node {self.host_peak[1]:,} B exceeds {self.host_capacity:,} B"
            )
        if self.nvme_peak[1] > self.nvme_capacity:
            out.append(f"NVMe per node {self.nvme_peak[1]:,} B exceeds {self.nvme_capacity:,} B")
        return out


def node_ledgers(plan: Plan, communication: bool = True, free: Plan | None = None) -> NodeLedgers:
    """Host, NVMe and checkpoint ledgers of a plan whose stack defaults are resolved
    (``estimate()`` passes one; see :func:`engine.stacks.defaults.resolved`);
    ``communication`` adds the step's communication section (views show it; the layout
    search, which only needs the verdict, skips it). The ledgers never read the
    micro-batch's shape: they are built once per :func:`~engine.ledger.shape_free.shape_free`
    plan (``free``: it, when the caller has it); the communication, which moves
    activations, from the plan itself."""
    free = shape_free(plan) if free is None else free
    require_resolved(free)  # no stack-decided field is in the batch
    memo = free_memo(free)
    ledgers = memo.get("ledgers", _ledgers, free)
    if not communication:
        return ledgers
    still = memo.get("still_ledgers", _still_ledgers, free)
    return still or replace(ledgers, moving=plan)


def _still_ledgers(free: Plan) -> NodeLedgers | None:
    """The ledgers with their communication when that reads no shape (no stage moves
    activations: :func:`~engine.ledger.nodes.communication.still_communication`), else
    None."""
    comm = still_communication(free)
    ledgers = free_memo(free).get("ledgers", _ledgers, free)
    return None if comm is None else replace(ledgers, kept_communication=comm)


def node_problems(plan: Plan, free: Plan | None = None) -> tuple[str, ...]:
    """:meth:`NodeLedgers.problems` of the plan's ledgers (resolved, as for
    :func:`node_ledgers`), worked out once per shape-free plan: the communication, the
    one part that reads the micro-batch's shape, never decides them (``free``: the
    plan's shape-free plan, when the caller has it)."""
    free = shape_free(plan) if free is None else free
    return free_memo(free).get("problems", _problems, free)


def _problems(free: Plan) -> tuple[str, ...]:
    return tuple(free_memo(free).get("ledgers", _ledgers, free).problems())


def _ledgers(free: Plan) -> NodeLedgers:
    """A shape-free plan's ledgers without the communication (kept in its memo)."""
    v = node_view(free)
    return NodeLedgers(
        view=v,
        host=tuple(host_rows(free, v)),
        nvme=tuple(nvme_rows(free, v)),
        checkpoint=tuple(checkpoint_rows(free)),
        transfers=step_transfers(free, v),
        host_capacity=free.hardware.host_ram_bytes_per_node,
        nvme_capacity=free.hardware.nvme_bytes_per_node,
    )
