"""Model architectures: a compact spec, and the exact tensor inventory it implies."""
