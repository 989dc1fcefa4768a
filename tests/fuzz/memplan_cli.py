"""Run ``memplan`` in-process, as the console script would (``gui.__main__.main``), with
stdout and stderr strict UTF-8 streams like a real terminal's, so text that cannot be
printed fails here as it would there."""

from __future__ import annotations

import contextlib
import io

from gui.__main__ import main


def _streams() -> tuple[io.TextIOWrapper, io.TextIOWrapper]:
    return tuple(  # type: ignore[return-value]
        io.TextIOWrapper(io.BytesIO(), encoding="utf-8", errors="strict") for _ in range(2)
    )


def run_memplan(argv: list[str]) -> tuple[int, str]:
    """Exit code and stderr of one in-process ``memplan`` run; raises what escapes."""
    out, err = _streams()
    code: int
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(argv)
        except SystemExit as exc:  # argparse
            code = exc.code if isinstance(exc.code, int) else 1
        out.flush()
        err.flush()
    err.seek(0)
    return code, err.read()
