#!/usr/bin/env bash
# Install MemPlan's desktop integration for the current user (no root needed):
# the application menu entry, the application/x-memplan file type for *.memplan files
# (double-click opens them in MemPlan), the icons, and a `memplan` command in
# ~/.local/bin linked to the bundle. The bundle itself stays where it is; move it first
# (e.g. to ~/.local/opt/memplan) if dist/ is not its final home.
#
#   packaging/linux/install-desktop.sh [BUNDLE_DIR]   default: dist/memplan
#   packaging/linux/install-desktop.sh --uninstall
#
# Honours XDG_DATA_HOME (default ~/.local/share) and MEMPLAN_BIN_DIR (default ~/.local/bin).
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
DATA="${XDG_DATA_HOME:-$HOME/.local/share}"
BIN="${MEMPLAN_BIN_DIR:-$HOME/.local/bin}"
SIZES=(16 24 32 48 64 128 256 512)

refresh() {
  # Rebuild the caches desktops read, where the tools exist; all are optional.
  if command -v update-mime-database >/dev/null 2>&1; then
    update-mime-database "$DATA/mime" >/dev/null
  fi
  if command -v update-desktop-database >/dev/null 2>&1; then
    update-desktop-database -q "$DATA/applications" || true
  fi
  if command -v gtk-update-icon-cache >/dev/null 2>&1 && [ -f "$DATA/icons/hicolor/index.theme" ]; then
    gtk-update-icon-cache -q -t "$DATA/icons/hicolor" || true
  fi
}

if [ "${1:-}" = "--uninstall" ]; then
  rm -f "$DATA/applications/memplan.desktop" "$DATA/mime/packages/memplan.xml" \
    "$DATA/icons/hicolor/scalable/apps/memplan.svg"
  for s in "${SIZES[@]}"; do rm -f "$DATA/icons/hicolor/${s}x${s}/apps/memplan.png"; done
  if [ -L "$BIN/memplan" ]; then rm -f "$BIN/memplan"; fi
  mkdir -p "$DATA/mime" "$DATA/applications"
  refresh
  echo "install-desktop: removed MemPlan's menu entry, file type and icons"
  exit 0
fi

BUNDLE="$(cd "${1:-$ROOT/dist/memplan}" 2>/dev/null && pwd)" || {
  echo "install-desktop: no bundle at ${1:-$ROOT/dist/memplan}; run packaging/build.sh first" >&2
  exit 1
}
EXE="$BUNDLE/memplan"
if [ ! -x "$EXE" ]; then
  echo "install-desktop: $EXE is not an executable bundle" >&2
  exit 1
fi

mkdir -p "$BIN" "$DATA/applications" "$DATA/mime/packages" "$DATA/icons/hicolor/scalable/apps"
ln -sfn "$EXE" "$BIN/memplan"

# The menu entry runs the bundle by absolute path: ~/.local/bin is not on every
# desktop session's PATH. Quoted for the Exec key's rules (paths may hold spaces).
sed "s|^Exec=memplan %f\$|Exec=\"$EXE\" %f|" "$HERE/memplan.desktop" \
  > "$DATA/applications/memplan.desktop"
cp "$HERE/memplan-mime.xml" "$DATA/mime/packages/memplan.xml"
cp "$ROOT/resources/icons/memplan.svg" "$DATA/icons/hicolor/scalable/apps/memplan.svg"
for s in "${SIZES[@]}"; do
  mkdir -p "$DATA/icons/hicolor/${s}x${s}/apps"
  cp "$ROOT/resources/icons/memplan-$s.png" "$DATA/icons/hicolor/${s}x${s}/apps/memplan.png"
done
refresh
if command -v xdg-mime >/dev/null 2>&1; then
  xdg-mime default memplan.desktop application/x-memplan || true
fi
echo "install-desktop: MemPlan installed for $(id -un): menu entry, *.memplan file type, icons"
echo "install-desktop: command line: $BIN/memplan (links to $EXE)"
