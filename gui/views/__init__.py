"""Views of one Estimate: stacked ledger chart, ledger table, verdict panel, stages."""
