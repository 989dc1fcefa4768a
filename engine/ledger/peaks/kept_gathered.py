"""Layer units kept gathered from forward to backward, and freed again in backward.

With FSDP2 ``reshard_after_forward=False`` (or FSDP1 ``SHARD_GRAD_OP``) every layer unit
stays unsharded after its forward, so backward issues no all-gather — but each unit is
still resharded after its *own* backward (issue 35 item 8): torch 2.13
``torch/distributed/fsdp/_fully_shard/_fsdp_param_group.py`` ``post_backward`` reshards
whenever ``reshard_after_backward`` (default True); FSDP1 ``_runtime_utils.py``
``_post_backward_reshard`` frees the unsharded flat parameter when
``_should_free_in_backward`` — in every step that syncs gradients (not in ``no_sync``
micro-steps of an accumulation, where ``SHARD_GRAD_OP`` keeps it). So:

- ``hbm.gathered.layers``: all ``n`` units through forward, the loss's backward and the
  last layer's (``backward.layers``);
- ``hbm.gathered.layers_left``: ``n − 1`` at the second layer's backward
  (``backward.middle``);
- ``hbm.gathered.first_layer``: the first layer's unit at ``backward.end``.
"""

from __future__ import annotations

from engine.ledger.row import (
    BACKWARD,
    FORWARD_BACKWARD,
    UNTIL_LAYERS_FREE,
    Row,
    make_row,
    with_middle,
)
from engine.units import fmt_count


def kept_gathered_rows(
    n_layers: int, unit: int, src: str, frees: bool, ids: tuple[str, str, str]
) -> list[Row]:
    """The rows of the module docstring for ``n_layers`` units of ``unit`` bytes
    (``frees``: each unit is resharded after its backward; else one row, live
    throughout forward and backward), with ``ids`` (all, left, first): written out in
    ``peaks/gathered.py``, the home of ``hbm.gathered.*`` (``engine/ledger/__init__``)."""
    all_id, left_id, first_id = ids
    n = n_layers * unit
    why = "reshard_after_forward=False / SHARD_GRAD_OP"
    rows = [
        make_row(
            id=all_id,
            label="All layer units unsharded between forward and backward",
            state="gathered",
            location="hbm",
            kind="peak",
            group="gathered",
            low=n,
            high=n,
            formula=f"{n_layers} units × {fmt_count(unit)} B ({why}) = {fmt_count(n)} B",
            source=src,
            phases=FORWARD_BACKWARD,
            backward=UNTIL_LAYERS_FREE if frees else None,
        )
    ]
    if not frees or not n_layers:
        return rows
    if with_middle(frozenset({"backward.middle"}), n_layers):
        left = (n_layers - 1) * unit
        rows.append(
            make_row(
                id=left_id,
                label="Layer units still unsharded at the second layer's backward",
                state="gathered",
                location="hbm",
                kind="peak",
                group="gathered",
                low=left,
                high=left,
                formula=f"{n_layers - 1} units × {fmt_count(unit)} B (the last one "
                f"resharded after its backward) = {fmt_count(left)} B",
                source=src,
                phases=BACKWARD,
                backward=frozenset({"backward.middle"}),
            )
        )
    rows.append(
        make_row(
            id=first_id,
            label="The first layer's unit, unsharded at its backward",
            state="gathered",
            location="hbm",
            kind="peak",
            group="gathered",
            low=unit,
            high=unit,
            formula=f"1 unit × {fmt_count(unit)} B (every later one resharded)",
            source=src,
            phases=BACKWARD,
            backward=frozenset({"backward.end"}),
        )
    )
    return rows
