#!/usr/bin/env bash
# Set up MemPlan on a fresh Debian/Ubuntu machine: system libraries Qt needs, then a
# virtual environment in .venv with MemPlan and its test/dev tools. Safe to re-run.
set -euo pipefail
cd "$(dirname "$0")"

APT_PACKAGES=(
  # Qt offscreen rendering and PDF output (shared/reference/qt-stack.md)
  libglib2.0-0 libegl1 libgl1 libfontconfig1 libxkbcommon0 libdbus-1-3 fonts-dejavu-core
  # a real window (xcb platform) and a virtual display for screenshots
  libxcb-cursor0 libxcb-icccm4 libxcb-image0 libxcb-keysyms1 libxcb-render-util0
  libxcb-shape0 libxcb-xkb1 libxkbcommon-x11-0 xvfb xauth
  # pdftotext / pdftoppm for report tests; venv for the environment
  poppler-utils python3-venv
  # the export injection suite lints every generated shell script (tests/security)
  shellcheck
)

missing=()
if command -v dpkg-query >/dev/null 2>&1; then
  for p in "${APT_PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
fi
if [ ${#missing[@]} -gt 0 ]; then
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  echo "bootstrap: installing system packages: ${missing[*]}"
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get update -qq
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
    "${missing[@]}" >/dev/null
fi

PY="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
.venv/bin/python -m pip install -q --disable-pip-version-check --upgrade pip >/dev/null
# The trace extra (memplan[trace]): torch first, pinned, so no resolver ever picks a CUDA
# build of it; here the CPU wheel is on local disk (README, "Tracing a plan").
.venv/bin/python -m pip install -q --disable-pip-version-check "torch==2.13.0"
# DS_BUILD_OPS=0: deepspeed (trace extra) builds from its sdist without compiling any op.
DS_BUILD_OPS=0 .venv/bin/python -m pip install -q --disable-pip-version-check -e ".[test,dev,trace]"
# Bytecode for the checkout, as pip writes for an installed package: an editable install
# leaves engine/ and gui/ without it, and where PYTHONDONTWRITEBYTECODE is set nothing
# ever writes it, so every command compiled its ~200 modules again (half a second of
# `memplan report`). Timestamp-checked: an edited module is compiled from source again.
.venv/bin/python -m compileall -q -j 0 engine gui resources >/dev/null
echo "bootstrap: ready (.venv/bin/memplan)"
