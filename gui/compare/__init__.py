"""File → Compare: two or more plans side by side, and the chart of what moved.

``compare_actions`` (the menu entries, used by the workbench), ``compare_window`` and
``compare_chart`` (drawn on screen and, by ``gui.report``, on paper). The face re-exports
nothing: importing a submodule runs it, and the report imports ``compare_chart`` without
the window's document and dialogs.
"""
