"""Golden outputs: the CLI prints, byte for byte, what it printed when they were recorded.

Recorded before the restructuring (issue 14) so that moving code could not move a
number. A change that is *meant* to alter an estimate re-records them with
``python -m tests.golden.capture`` and says in its commit which rule changed; the diff of
``tests/golden/out/`` then shows exactly which figures moved.
"""

from __future__ import annotations

import contextlib
import io

import pytest

from gui.__main__ import main
from tests.golden.capture import OUT, command_args, wanted


@pytest.mark.parametrize(("name", "command"), wanted(), ids=lambda v: str(v))
def test_cli_output_is_unchanged(name: str, command: str) -> None:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            rc = main(command_args(name, command))
        except SystemExit as exc:  # argparse errors
            rc = int(exc.code or 0)
    got = f"exit {rc}\n{out.getvalue()}{err.getvalue()}"
    expected = (OUT / f"{name}.{command}").read_text(encoding="utf-8")
    assert got == expected
