"""The Sweep tab: vary one input over a range and chart peak HBM against it.

``sweep_panel`` (the tab, used by the workbench) and ``sweep_chart`` (the on-screen chart;
the drawing itself is ``gui.views.sweep_paint``, shared with the report).
"""
