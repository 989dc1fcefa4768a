"""Other tools' estimators, reproduced as reference modes to compare MemPlan against."""
