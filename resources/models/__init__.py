"""Model presets: one JSON per model (a package so wheels ship its data files)."""
