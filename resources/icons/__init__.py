"""The MemPlan application icon: memplan.svg (drawn by hand) and PNGs rendered from it
by packaging/render_icons.py. A package so the icons ship as package data."""
