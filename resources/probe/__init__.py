"""The measurement probe template (``memplan probe`` fills in the plan's hash)."""
