"""MemPlan's desktop front end (PySide6 + pyqtgraph): a view of the engine's Estimate."""
