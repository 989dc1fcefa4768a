"""engine/ must never import Qt: the CLI, tests and layout search run without it."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

ENGINE = Path(__file__).resolve().parents[2] / "engine"
FORBIDDEN = ("PySide6", "PyQt5", "PyQt6", "pyqtgraph", "shiboken6", "gui")


def _imported_roots(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    roots = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            roots |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            roots.add(node.module.split(".")[0])
    return roots


def test_no_engine_module_imports_qt_statically() -> None:
    files = sorted(ENGINE.rglob("*.py"))
    assert files, "engine sources not found"
    offenders = {
        str(f.relative_to(ENGINE)): sorted(_imported_roots(f) & set(FORBIDDEN)) for f in files
    }
    assert {k: v for k, v in offenders.items() if v} == {}


def test_running_the_cli_loads_no_qt() -> None:
    code = (
        "import sys, pkgutil, importlib, engine\n"
        "for m in pkgutil.walk_packages(engine.__path__, 'engine.'):\n"
        "    importlib.import_module(m.name)\n"
        "from engine.cli import main\n"
        "main(['estimate', '--json'])\n"
        "bad = [m for m in sys.modules if m.split('.')[0] in "
        f"{FORBIDDEN!r}]\n"
        "assert not bad, bad\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stderr
