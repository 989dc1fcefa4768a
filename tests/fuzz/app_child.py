"""An app instance in its own process, for crash tests (``run_recovery``).

Usage: ``python -m tests.fuzz.app_child edit SEQ_LEN`` opens a window, makes an unsaved
edit, autosaves it and prints ``autosaved``; ``python -m tests.fuzz.app_child recover``
starts as the app does, answers the recovery dialog with "restore" for every plan and
prints ``recovered N``. Both then run until killed. The autosave folder comes from
``MEMPLAN_STATE_DIR``, as in the tests.
"""

from __future__ import annotations

import sys

from gui import app, dialogs
from gui.files import recovery


def main(mode: str, seq_len: int) -> None:
    qt = app.make_app()
    window = app.new_window()
    if mode == "edit":
        window.doc.set("batch.seq_len", seq_len)
        window.doc.flush()
        print("autosaved" if window.autosaver.tick() else "autosave failed", flush=True)
    else:
        opened = []

        def restore_all(_parent: object, orphans: list) -> dict:  # type: ignore[type-arg]
            return {o.plan_path: "restore" for o in orphans}

        def open_window() -> app.MainWindow:
            opened.append(app.new_window())
            return opened[-1]

        dialogs.ask_recovery = restore_all  # type: ignore[assignment]
        recovery.offer_recovery(window, open_window)
        print(f"recovered {1 + len(opened) if window.doc.dirty else len(opened)}", flush=True)
    qt.exec()


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 0)
