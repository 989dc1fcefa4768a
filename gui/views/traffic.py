"""The Per step tab: the step's tokens, the bytes it moves, and the least time they take.

The step's samples, token positions and real tokens (``engine.workload.step_tokens``:
padding is computed but not trained on; packing removes it) come first, with the
torch.compile note when the plan runs compiled.

Offload buys capacity, never throughput: the engine counts the bytes the offload
placement moves per optimizer step between device and host and between host and NVMe
(``Estimate.nodes.transfers``) and, when the plan gives link bandwidths, the least time
they take against the step-time target. This tab shows those figures (they used to be
in the CLI and the report only).

Communication (the collectives of TP/PP/CP/EP/DP with their time floor) is the second
block. The engine's communication section comes from the parallelism work
(``Estimate.nodes.communication``: transfers with intra-/inter-node bytes and a floor in
seconds); until an estimate carries it, the block says so. The view reads it
duck-typed through :class:`CommunicationLike`, so nothing here changes when it lands.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from PySide6.QtWidgets import QTextBrowser, QWidget

from engine.estimate import Estimate
from engine.plan import Plan
from engine.units import fmt_bytes
from engine.workload import compile_note, step_tokens

COMMUNICATION_PENDING = (
    "The communication floor (bytes each collective moves inside the node and across "
    "nodes, and the least time they take) is not computed by this engine yet."
)


class TransferLike(Protocol):
    what: str
    group: str
    intra: int
    inter: int


class CommunicationLike(Protocol):
    """What the communication section offers (engine.ledger.nodes.communication)."""

    transfers: Sequence[TransferLike]
    intra_gbps: float
    inter_gbps: float

    @property
    def floor_seconds(self) -> float: ...


def _esc(text: object) -> str:
    return str(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _seconds(value: float | None, bandwidth: float | None, label: str) -> str:
    if value is not None:
        return f"≥ {value:.3f} s per step"
    if bandwidth is None:
        return f"set {label} on the Hardware tab for the time"
    return "—"


def tokens_html(plan: Plan) -> str:
    """The tokens block: samples, positions computed and real tokens per step."""
    t = step_tokens(plan)
    how = "packed without padding" if plan.workload.packing == "packed" else "padded"
    note = compile_note(plan)
    return (
        "<h3>Tokens per optimizer step</h3>"
        f"<p>{t.samples:,} samples ({_esc(how)}) · <b>{t.real:,} real tokens</b> · "
        f"{t.positions:,} token positions computed"
        + (f" ({t.padding_share:.0%} padding)" if t.padding_share > 0 else "")
        + "</p>"
        + (f"<p><i>{_esc(note)}</i></p>" if note else "")
    )


def offload_html(plan: Plan, est: Estimate, units: Any) -> str:
    """The offload traffic block."""
    t = est.nodes.transfers
    hw, target = plan.hardware, plan.offload.step_time_target_s
    rows = [
        (
            "Device ↔ host, per rank",
            fmt_bytes(t.device_host_bytes_per_rank, units),
            _seconds(t.device_host_seconds, hw.host_link_gbps, "the host link"),
        ),
        (
            "Host ↔ NVMe, per node",
            fmt_bytes(t.host_nvme_bytes_per_node, units),
            _seconds(t.host_nvme_seconds, hw.nvme_gbps, "the NVMe bandwidth"),
        ),
    ]
    body = "".join(
        f"<tr><td>{_esc(a)}</td><td align='right'>{_esc(b)}</td><td>{_esc(c)}</td></tr>"
        for a, b, c in rows
    )
    goal = f"{target:g} s" if target is not None else "none (Offload tab)"
    lines = "".join(f"<li>{_esc(line)}</li>" for line in t.lines)
    return (
        "<h3>Offload traffic per optimizer step</h3>"
        f"<p><b>{_esc(t.verdict)}</b> · step-time target: {_esc(goal)}</p>"
        "<table cellspacing='0' cellpadding='3' border='0'>"
        "<tr><th align='left'>Link</th><th align='right'>Bytes per step</th>"
        "<th align='left'>Least time</th></tr>"
        f"{body}</table>" + (f"<ul>{lines}</ul>" if lines else "")
    )


def communication_html(comm: CommunicationLike | None, units: Any) -> str:
    """The communication block (a placeholder until the engine computes it)."""
    head = "<h3>Communication per step</h3>"
    if comm is None:
        return head + f"<p><i>{_esc(COMMUNICATION_PENDING)}</i></p>"
    rows = "".join(
        f"<tr><td>{_esc(x.what)}</td><td>{_esc(x.group)}</td>"
        f"<td align='right'>{_esc(fmt_bytes(x.intra, units))}</td>"
        f"<td align='right'>{_esc(fmt_bytes(x.inter, units))}</td></tr>"
        for x in comm.transfers
    )
    return (
        head + f"<p>Floor: <b>≥ {comm.floor_seconds:.3f} s per step</b> "
        f"(inside the node at {comm.intra_gbps:g} GB/s, across nodes at "
        f"{comm.inter_gbps:g} GB/s)</p>"
        "<table cellspacing='0' cellpadding='3'><tr><th align='left'>What</th>"
        "<th align='left'>Group</th><th align='right'>Inside the node</th>"
        f"<th align='right'>Across nodes</th></tr>{rows}</table>"
    )


class TrafficView(QTextBrowser):
    """Tokens, offload traffic and (when the engine computes it) communication, per
    step."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("traffic")
        self.setOpenLinks(False)

    def show_estimate(self, plan: Plan, est: Estimate, units: str) -> None:
        comm: CommunicationLike | None = getattr(est.nodes, "communication", None)
        html = tokens_html(plan) + offload_html(plan, est, units) + communication_html(comm, units)
        if html != getattr(self, "_html", None):
            self._html = html
            self.setHtml(html)
