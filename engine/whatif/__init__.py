"""What-if questions answered by re-estimating other plans: diagnostics, sensitivity, fit."""
