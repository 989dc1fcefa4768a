"""Measured runs: records (what a rank used), reconciliation with the estimate, and
calibration proposals (explicit, undoable edits of the plan's uncertain ranges)."""

from engine.validation.calibrate import Calibration, Proposal, calibration_changes, propose
from engine.validation.reconcile import Figure, RankResult, Reconciliation, reconcile
from engine.validation.records import MeasuredRecord, RecordError, load_records, parse_record
from engine.validation.store import attach, records_of

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
