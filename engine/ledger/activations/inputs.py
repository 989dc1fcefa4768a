"""The micro-batch itself (``hbm.inputs.*``) and the model's small buffers
(``hbm.buffers.*``): held for the whole step."""

from __future__ import annotations

from engine.ledger.activations.geometry import FP32, INT64, Geometry
from engine.ledger.row import Row, make_row
from engine.plan import Plan
from engine.units import fmt_count, round_up


def input_rows(plan: Plan, g: Geometry, last: bool) -> list[Row]:
    """The input batch (and the labels on the last stage) and the rotary buffers."""
    gran = g.granularity
    ids = round_up(g.tokens * INT64, gran)
    n_in = 2 if last else 1
    rows = [
        make_row(
            id="hbm.inputs.batch",
            label="Input batch (input_ids" + (", labels)" if last else ")"),
            state="inputs",
            location="hbm",
            kind="persistent",
            group="inputs",
            low=n_in * ids,
            high=n_in * ids,
            formula=f"{n_in} × int64 {g.micro_batch}·{g.seq}·8 = {fmt_count(n_in * ids)} B",
            source="hf-transformers-llama",
        )
    ]
    arch = plan.model.architecture
    if plan.runtime.activation_profile == "hf-transformers" and arch.position == "rotary":
        inv = round_up(g.head_dim // 2 * FP32, gran)
        rows.append(
            make_row(
                id="hbm.buffers.rotary",
                label="Rotary inv_freq buffers",
                state="buffers",
                location="hbm",
                kind="persistent",
                group="buffers",
                low=2 * inv,
                high=2 * inv,
                formula=f"inv_freq and original_inv_freq, 2 × fp32 {g.head_dim // 2}·4 "
                f"rounded to {gran} = {fmt_count(2 * inv)} B",
                source="hf-transformers-llama",
            )
        )
    return rows
