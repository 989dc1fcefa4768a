"""Plan files on disk: File commands, save checks, autosave and crash recovery.

``file_actions`` (New, Open, Save … and the unsaved prompt), ``save_check``,
``file_identity`` (a file's name and times across saves), ``autosave`` with ``instance``
(which app instances run), and ``recovery`` with ``recovery_dialog``. The face re-exports
nothing: ``gui.document`` imports ``file_identity``, and modules here import the document,
so an eager face would be an import cycle at run time.
"""
