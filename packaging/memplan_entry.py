"""Entry point of the bundled ``memplan`` executable (PyInstaller script).

It is the ``memplan`` console script (``gui.__main__:main``) and nothing more, so the
bundle behaves exactly like a pip install: engine subcommands without Qt, the desktop
app with no subcommand. One addition for whoever builds the bundle: with
``MEMPLAN_BUNDLE_SELFTEST`` set it runs ``bundle_selftest`` instead, which checks from
inside the frozen program that resources and the Qt stack were bundled. And one for the
window: with ``MEMPLAN_ANALYSIS_SERVER`` set (by ``gui.workers.analysis_worker``) it is the
window's analysis worker process (a frozen program has no ``python -m``); with
``MEMPLAN_REPORT_PAINTER`` set (by ``gui.report.paint_process``) the report's painter.
"""

from __future__ import annotations

import os


def main() -> int:
    if os.environ.get("MEMPLAN_ANALYSIS_SERVER"):  # the window's worker process
        from gui.workers.analysis_server import main as serve

        return serve()
    if os.environ.get("MEMPLAN_REPORT_PAINTER"):  # the window's report painter process
        from gui.report.paint_server import main as paint

        return paint()
    mode = os.environ.get("MEMPLAN_BUNDLE_SELFTEST")
    if mode:
        import bundle_selftest

        return bundle_selftest.run(mode)
    from gui.__main__ import main as memplan_main

    return memplan_main()


if __name__ == "__main__":
    raise SystemExit(main())
