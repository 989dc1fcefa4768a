"""Measured runs: records (what a rank used), reconciliation with the estimate, and
calibration proposals (explicit, undoable edits of the plan's uncertain ranges).

The record schema, the store and calibration are imported on first use (as
:mod:`gui.report` does): a report of a plan without measured runs reconciles nothing, yet
asks :mod:`engine.validation.reconcile` for the runtime rows' range, and should not
build the record models and the calibration classes for that. ``reconcile`` itself is
imported here: the function shares its name with its module, and a lazy name would
find the module once anything imported it.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

from engine.validation.reconcile import Figure, RankResult, Reconciliation, reconcile

if TYPE_CHECKING:
    from engine.validation.calibrate import (
        Calibration,
        Proposal,
        calibration_changes,
        propose,
    )
    from engine.validation.records import (
        MeasuredRecord,
        RecordError,
        load_records,
        parse_record,
    )
    from engine.validation.store import attach, records_of

_EXPORTS = {
    "Calibration": "engine.validation.calibrate",
    "Proposal": "engine.validation.calibrate",
    "calibration_changes": "engine.validation.calibrate",
    "propose": "engine.validation.calibrate",
    "MeasuredRecord": "engine.validation.records",
    "RecordError": "engine.validation.records",
    "load_records": "engine.validation.records",
    "parse_record": "engine.validation.records",
    "attach": "engine.validation.store",
    "records_of": "engine.validation.store",
}

__all__ = [
    "Calibration",
    "Figure",
    "MeasuredRecord",
    "Proposal",
    "RankResult",
    "Reconciliation",
    "RecordError",
    "attach",
    "calibration_changes",
    "load_records",
    "parse_record",
    "propose",
    "reconcile",
    "records_of",
]


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'engine.validation' has no attribute {name!r}")
    return getattr(import_module(_EXPORTS[name]), name)
