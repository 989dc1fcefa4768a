"""The README's screenshots — run by hand under Xvfb, writes PNGs to docs/ (not a test).

    xvfb-run -s "-screen 0 1366x768x24" env PYTHONPATH=. python tests/screenshots.py 1366x768
    xvfb-run -s "-screen 0 1920x1080x24" env PYTHONPATH=. python tests/screenshots.py 1920x1080

Each run opens the window as a user would on a screen of that size (the window fits the
screen it is on, :mod:`gui.screen_fit`), on the default plan, waits for the background
analysis, and grabs it: at 1366×768 the Model tab, at 1920×1080 the Method tab scrolled
to the training stack and precision, with the "from stack" badges.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SHOTS = {
    "1366x768": ("model", "screenshot-main.png"),
    "1920x1080": ("method", "screenshot-1920x1080.png"),
}


def main() -> int:
    size = sys.argv[1] if len(sys.argv) > 1 else "1366x768"
    tab, name = SHOTS[size]
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["MEMPLAN_CONFIG_DIR"] = str(Path(tmp) / "config")
        os.environ["MEMPLAN_STATE_DIR"] = str(Path(tmp) / "state")
        from gui.app import make_app
        from gui.main_window import MainWindow
        from gui.settings import Settings

        app = make_app()
        win = MainWindow(Settings(), autosave_ms=3_600_000)
        win.show()
        start = time.perf_counter()
        while True:  # at least 3 s, then until the background analysis is done (≤ 60 s)
            app.processEvents()
            time.sleep(0.01)
            waited = time.perf_counter() - start
            if waited > 60 or (waited > 3 and not win.worker.busy):
                break
        keys = list(win.tabs)
        win.inputs.setCurrentIndex(keys.index(tab))
        for _ in range(50):
            app.processEvents()
            time.sleep(0.01)
        out = ROOT / "docs" / name
        win.grab().save(str(out))
        print(f"wrote {out} ({win.width()}×{win.height()} window on a {size} screen)")
        win.doc.undo_stack.setClean()
        win.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
