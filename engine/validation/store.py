"""Keep measured records with the plan: the ``.memplan`` file's ``measurements`` list.

A PlanFile is immutable, so attaching makes a new one (``dataclasses.replace``); the GUI
can put that on its undo stack like any other edit. A record identical to one already
stored is not added twice, so re-importing the same folder is harmless.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable

from engine.planfile import PlanFile
from engine.validation.records import MeasuredRecord, stored_records


def attach(pf: PlanFile, records: Iterable[MeasuredRecord]) -> tuple[PlanFile, int]:
    """A PlanFile with the records appended; returns it and how many were new."""
    stored = list(pf.measurements)
    added = 0
    for record in records:
        doc = record.to_json()
        if doc not in stored:
            stored.append(doc)
            added += 1
    return dataclasses.replace(pf, measurements=tuple(stored)), added


def records_of(pf: PlanFile) -> list[MeasuredRecord]:
    """The records a plan file holds (RecordError names a bad entry's index)."""
    return stored_records(pf.measurements)
