"""The input tabs' fields: specs read from the plan's metadata and the widgets bound to them.

``fieldspec`` (what a field looks like), ``fields`` and ``band_field`` (bindings),
``plan_view`` (one plan as the tabs show it), ``stack_badge`` ("from stack"),
``preset_defaults`` / ``preset_hint``, ``plan_line_edit`` and ``undo_text`` (edits in
words). The face re-exports nothing: ``gui.document`` imports ``undo_text``, and
``fields`` imports the document, so an eager face would be an import cycle at run time.
"""
