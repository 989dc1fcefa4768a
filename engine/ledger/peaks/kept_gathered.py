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
    Moment,
    Phase,
    Role,
    Row,
    make_row,
    with_middle,
)
from engine.units import fmt_count


def gathered_row(
    id_: str,
    label: str,
    n: int,
    formula: str,
    src: str,
    phases: frozenset[Phase],
    backward: frozenset[Moment] | None = None,
    role: Role | None = None,
) -> Row:
    """An exact row of gathered (unsharded) parameters: ``n`` bytes at both ends."""
    return make_row(
        id=id_,
        label=label,
        state="gathered",
        location="hbm",
        kind="peak",
        group="gathered",
        low=n,
        high=n,
        formula=formula,
        source=src,
        phases=phases,
        backward=backward,
        role=role,
    )


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
        gathered_row(
            all_id,
            "All layer units unsharded between forward and backward",
            n,
            f"{n_layers} units × {fmt_count(unit)} B ({why}) = {fmt_count(n)} B",
            src,
            FORWARD_BACKWARD,
            UNTIL_LAYERS_FREE if frees else None,
        )
    ]
    if not frees or not n_layers:
        return rows
    if with_middle(frozenset({"backward.middle"}), n_layers):
        left = (n_layers - 1) * unit
        rows.append(
            gathered_row(
                left_id,
                "Layer units still unsharded at the second layer's backward",
                left,
                f"{n_layers - 1} units × {fmt_count(unit)} B (the last one "
                f"resharded after its backward) = {fmt_count(left)} B",
                src,
                BACKWARD,
                frozenset({"backward.middle"}),
            )
        )
    rows.append(
        gathered_row(
            first_id,
            "The first layer's unit, unsharded at its backward",
            unit,
            f"1 unit × {fmt_count(unit)} B (every later one resharded)",
            src,
            BACKWARD,
            frozenset({"backward.end"}),
        )
    )
    return rows
