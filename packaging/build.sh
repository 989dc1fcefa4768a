#!/usr/bin/env bash
# Build the one-folder desktop bundle dist/memplan/ with PyInstaller (Linux; see
# packaging/README.md for Windows and macOS). It keeps its own virtual environment in
# build/venv holding MemPlan's runtime dependencies and PyInstaller only, so nothing from
# a developer's test tools leaks into the bundle; the project's code is analysed straight
# from this source tree. Safe to re-run: the venv is reused, the bundle rebuilt.
#
#   packaging/build.sh            build dist/memplan/
#   PYTHON=python3.12 packaging/build.sh   use another interpreter for the venv
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
cd "$ROOT"

PY="${PYTHON:-python3}"
VENV="build/venv"
if [ ! -x "$VENV/bin/python" ]; then
  echo "build: creating $VENV with $("$PY" --version 2>&1)"
  "$PY" -m venv "$VENV"
fi
VPY="$VENV/bin/python"

# Runtime dependencies and the `packaging` extra, read from pyproject.toml so the list
# lives in one place. The project itself is not installed: the spec analyses the tree.
mapfile -t REQS < <("$VPY" - <<'PYEOF'
import tomllib
with open("pyproject.toml", "rb") as f:
    project = tomllib.load(f)["project"]
for req in project["dependencies"] + project["optional-dependencies"]["packaging"]:
    print(req)
PYEOF
)
echo "build: installing into $VENV: ${REQS[*]}"
"$VPY" -m pip install -q --disable-pip-version-check --upgrade pip >/dev/null
"$VPY" -m pip install -q --disable-pip-version-check "${REQS[@]}"

start=$(date +%s)
"$VPY" -m PyInstaller --noconfirm --clean --log-level WARN \
  --distpath dist --workpath build/pyinstaller packaging/memplan.spec
end=$(date +%s)

BUNDLE="dist/memplan"
echo "build: PyInstaller took $((end - start)) s"
echo "build: bundle $BUNDLE: $(du -sh "$BUNDLE" | cut -f1), $(find "$BUNDLE" -type f | wc -l) files"
echo "build: run it with $BUNDLE/memplan estimate  (or $BUNDLE/memplan for the desktop app)"
