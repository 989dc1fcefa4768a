"""Hardware presets: accelerators and nodes (accelerators.json)."""
