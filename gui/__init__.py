"""MemPlan's desktop front end (PySide6, charts painted with QPainter): a view of the
engine's Estimate."""
