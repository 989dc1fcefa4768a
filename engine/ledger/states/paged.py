"""bitsandbytes paged optimizers: optimizer state in CUDA unified memory.

``bnb.optim.PagedAdamW8bit`` / ``PagedAdamW32bit`` (HF Trainer ``optim=paged_adamw_8bit``
/ ``paged_adamw_32bit``) allocate their state with ``is_paged=True``: bitsandbytes/
optim/optimizer.py ``Optimizer8bit.get_state_buffer`` calls ``F.get_paged`` (bitsandbytes/
functional.py: ``cudaMallocManaged`` through ``lib.cget_managed_ptr``), outside PyTorch's
caching allocator; the driver migrates pages to host memory when the device runs short
and back when the step touches them (prefetched per tensor, ``prefetch_state``). So the
state is on the GPU while it fits and on the host when it does not: its HBM row runs
from 0 (all paged out) to its whole size (all resident), and a host row holds up to
the same bytes. The state's sizes are those of the unpaged optimizer
(:mod:`engine.ledger.states.optimizers`: 8-bit blockwise, 1 B a moment an element plus an
fp32 absmax per 256-element block; 32-bit, 4 B).

Source ``bnb-paged-optim``.
"""

from __future__ import annotations

from engine.ledger.row import Row, make_row
from engine.sections.method import OptimizerSection
from engine.units import fmt_count

SOURCE = "bnb-paged-optim"


def hbm_low(opt: OptimizerSection, n: int) -> int:
    """The HBM low end of a state row of ``n`` bytes: 0 when paged (module doc)."""
    return 0 if opt.paged else n


def paged_host_rows(opt: OptimizerSection, total: int) -> list[Row]:
    """The host side of a paged optimizer's state: 0 (resident) up to all of it."""
    if not opt.paged or not total:
        return []
    return [
        make_row(
            id="host.optimizer.paged",
            label="Optimizer state paged out to host (unified memory)",
            state="optimizer",
            location="host",
            kind="persistent",
            group="optimizer",
            low=0,
            high=total,
            formula=f"0 (resident) – {fmt_count(total)} B (all paged out): bitsandbytes "
            "cudaMallocManaged state, migrated under memory pressure",
            source=SOURCE,
        )
    ]
