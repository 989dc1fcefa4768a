#!/usr/bin/env bash
# Smoke test of the desktop bundle, the way an analyst's machine will see it: build
# dist/memplan/ (packaging/build.sh), copy it away from the source tree, and run it from
# an empty folder with a bare environment (no venv, no PYTHONPATH), offscreen. Then
# measure the bundle's size and the start time of `memplan estimate --json`.
#
#   packaging/smoke_test.sh              build, then test
#   packaging/smoke_test.sh --no-build   test the existing dist/memplan/
#
# Checks that need something not in this build (the `report` subcommand, the GUI's
# gui/app.py) are reported as skipped, never as passed. Ends with "N passed, N failed".
set -uo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
cd "$ROOT"
PY="${PYTHON:-python3}"  # only parses JSON and computes medians, outside the bundle

if [ "${1:-}" != "--no-build" ]; then
  packaging/build.sh || { echo "smoke: build failed"; exit 1; }
fi
if [ ! -x dist/memplan/memplan ]; then
  echo "smoke: no bundle at dist/memplan/; run packaging/build.sh"
  exit 1
fi

WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
cp -a dist/memplan "$WORK/memplan"   # relocated: nothing may point back into the tree
EXE="$WORK/memplan/memplan"
mkdir -p "$WORK/run" "$WORK/home"
cd "$WORK/run"

passed=0
failed=0
skipped=0
ok() { passed=$((passed + 1)); echo "PASS $*"; }
bad() { failed=$((failed + 1)); echo "FAIL $*"; }
skip() { skipped=$((skipped + 1)); echo "SKIP $*"; }

# The bundle with a bare environment: the interpreter, the libraries and the resources
# must all come from the bundle folder. SELFTEST=mode runs the bundle's self-test.
mp() {
  env -i PATH=/usr/bin:/bin HOME="$WORK/home" LANG=C.UTF-8 QT_QPA_PLATFORM=offscreen \
    MEMPLAN_BUNDLE_SELFTEST="${SELFTEST:-}" "$EXE" "$@"
}

# json_check FILE EXPR: EXPR is a Python expression over `d` (the parsed JSON).
json_check() {
  "$PY" -c 'import json, sys; d = json.load(open(sys.argv[1])); sys.exit(0 if eval(sys.argv[2]) else 1)' \
    "$1" "$2" 2>/dev/null
}

# 1. usage
if mp --help > help.txt 2>&1 && grep -q "estimate" help.txt; then
  ok "memplan --help lists the subcommands"
else
  bad "memplan --help"; cat help.txt
fi

# 2. resources resolve inside the relocated bundle, not the source tree
if SELFTEST=resources mp > res.json 2> res.err \
  && json_check res.json "d['resources']['ok'] and d['resources']['resources_dir'].startswith('$WORK/memplan/')"; then
  ok "resources found inside the bundle: $("$PY" -c 'import json,sys; r=json.load(open(sys.argv[1]))["resources"]; print(r["resources_dir"], "-", r["presets"], "presets")' res.json)"
else
  bad "resources self-test"; cat res.json res.err
fi

# 3. estimate --json, default plan
if mp estimate --json > default.json 2> default.err \
  && json_check default.json "d['json_version'] == 1 and d['rows'] and d['totals']['hbm']['high_bytes'] > 0 and d['fit']['verdict'] in ('fits', 'straddles', 'does_not_fit')"; then
  ok "memplan estimate --json (default plan): $("$PY" -c 'import json,sys; d=json.load(open(sys.argv[1])); print(len(d["rows"]), "rows, verdict", d["fit"]["verdict"])' default.json)"
else
  bad "memplan estimate --json"; head -c 2000 default.json; cat default.err
fi

# 4. estimate --json with a bundled preset
if mp estimate --preset smollm-135m --json > preset.json 2> preset.err \
  && json_check preset.json "d['rows'] and d['totals']['hbm']['high_bytes'] > 0"; then
  ok "memplan estimate --preset smollm-135m --json"
else
  bad "memplan estimate --preset smollm-135m --json"; head -c 2000 preset.json; cat preset.err
fi

# 5. the preset catalogue
if grep -qE "^ +models " help.txt; then
  if mp models > models.txt 2>&1 && grep -qi "llama" models.txt; then
    ok "memplan models lists $(grep -c . models.txt) lines"
  else
    bad "memplan models"; cat models.txt
  fi
else
  skip "memplan models: no such subcommand in this build"
fi

# 6. a plan file: new → validate → estimate (text)
if mp new -o plan.memplan > new.txt 2>&1 && mp validate plan.memplan > validate.txt 2>&1 \
  && mp estimate plan.memplan > estimate.txt 2>&1 && [ -s estimate.txt ]; then
  ok "memplan new / validate / estimate on a .memplan file"
else
  bad "plan file round trip"; cat new.txt validate.txt estimate.txt 2>/dev/null
fi

# 6b. the measurement probe template ships as a file inside the bundle
if grep -qE "^ +probe " help.txt; then
  if mp probe plan.memplan -o probe.py > probe.txt 2>&1 && grep -q "MemPlanProbe" probe.py; then
    ok "memplan probe writes the measurement snippet from the bundle"
  else
    bad "memplan probe"; cat probe.txt
  fi
else
  skip "memplan probe: no such subcommand in this build"
fi


# 7. a bad plan is refused with exit code 1 and a field path
mp estimate --set batch.seq_len=-1 > badplan.txt 2>&1
rc=$?
if [ "$rc" -eq 1 ] && grep -q "seq_len" badplan.txt; then
  ok "a bad --set is refused (exit 1, names the field)"
else
  bad "bad plan: exit $rc"; cat badplan.txt
fi

# 8. the PDF report (issue 9), when this build has it
if grep -qE "^ +report " help.txt; then
  mp report --help > report-help.txt 2>&1
  if grep -qE -- "(-o|--output)" report-help.txt; then
    report_cmd=(report plan.memplan -o report.pdf)
  else
    report_cmd=(report plan.memplan report.pdf)
  fi
  if mp "${report_cmd[@]}" > report.txt 2>&1 && head -c 4 report.pdf 2>/dev/null | grep -q "%PDF"; then
    ok "memplan ${report_cmd[*]}: $(wc -c < report.pdf) bytes of PDF"
  else
    bad "memplan ${report_cmd[*]}"; cat report-help.txt report.txt
  fi
else
  skip "memplan report: no such subcommand in this build yet (issue 9)"
fi

# 9. the Qt stack in the bundle: offscreen platform, fonts, a painted chart, SVG icon, PDF
if SELFTEST=qt mp > qt.json 2> qt.err && json_check qt.json "d['qt']['ok']"; then
  ok "Qt self-test: $("$PY" -c 'import json,sys; q=json.load(open(sys.argv[1]))["qt"]; print("PySide6 {qt}, {fonts} font families, PDF {pdf_bytes} bytes".format(**q))' qt.json)"
else
  bad "Qt self-test"; cat qt.json qt.err
fi

# 9b. the same on a real X display (the xcb platform plugin and its libraries)
if command -v xvfb-run > /dev/null 2>&1; then
  if env -i PATH=/usr/bin:/bin HOME="$WORK/home" LANG=C.UTF-8 MEMPLAN_BUNDLE_SELFTEST=qt \
    xvfb-run -a env QT_QPA_PLATFORM=xcb "$EXE" > xcb.json 2> xcb.err \
    && json_check xcb.json "d['qt']['ok'] and d['qt']['platform'] == 'xcb'"; then
    ok "Qt self-test on an X display (Xvfb, xcb platform)"
  else
    bad "Qt self-test under Xvfb"; cat xcb.json xcb.err
  fi
else
  skip "Qt on an X display: xvfb-run not installed"
fi

# 10. the desktop app itself, when gui/app.py is part of the build
if json_check res.json "d['resources']['gui_app']"; then
  # It should still be running (exit 124 from timeout) or have closed cleanly (0).
  env -i PATH=/usr/bin:/bin HOME="$WORK/home" LANG=C.UTF-8 QT_QPA_PLATFORM=offscreen \
    timeout 10 "$EXE" plan.memplan > gui.txt 2>&1
  rc=$?
  if { [ "$rc" -eq 124 ] || [ "$rc" -eq 0 ]; } && ! grep -q "Traceback" gui.txt; then
    ok "the desktop app starts offscreen on plan.memplan (exit $rc after ≤10 s)"
  else
    bad "desktop app: exit $rc"; cat gui.txt
  fi
else
  mp > gui.txt 2>&1
  if grep -q "not available in this build" gui.txt; then
    skip "desktop app: gui/app.py is not in this build yet; \`memplan\` says so and exits"
  else
    bad "desktop app missing but \`memplan\` did not say so"; cat gui.txt
  fi
fi

# 10b. the window's report painter process (gui/report/paint_server) is in the bundle: run
# as the window runs it, with its job's stdin closed it loads the report's modules and
# ends quietly (exit 0); a module left out of the bundle fails here with an ImportError.
if json_check res.json "d['resources']['gui_app']"; then
  if env -i PATH=/usr/bin:/bin HOME="$WORK/home" LANG=C.UTF-8 MEMPLAN_REPORT_PAINTER=1 \
    timeout 60 "$EXE" painter.pdf < /dev/null > painter.txt 2>&1 && ! grep -q "Traceback\|memplan:" painter.txt; then
    ok "the report painter process starts from the bundle and ends on an empty job"
  else
    bad "report painter process"; cat painter.txt
  fi
else
  skip "report painter: gui/app.py is not in this build"
fi

# 11. desktop integration into a scratch XDG_DATA_HOME, then removal
DESK="$WORK/xdg"
if XDG_DATA_HOME="$DESK" MEMPLAN_BIN_DIR="$WORK/bin" HOME="$WORK/home" \
  "$ROOT/packaging/linux/install-desktop.sh" "$WORK/memplan" > desk.txt 2>&1 \
  && grep -q "^Exec=\"$EXE\" %f$" "$DESK/applications/memplan.desktop" \
  && grep -q "^MimeType=application/x-memplan;$" "$DESK/applications/memplan.desktop" \
  && [ -f "$DESK/icons/hicolor/256x256/apps/memplan.png" ] \
  && { [ ! -f "$DESK/mime/globs2" ] || grep -q "application/x-memplan:\*.memplan" "$DESK/mime/globs2"; } \
  && "$WORK/bin/memplan" --help > /dev/null 2>&1; then
  ok "install-desktop.sh: menu entry, *.memplan MIME type, icons, ~/.local/bin/memplan"
else
  bad "install-desktop.sh"; cat desk.txt
fi
if command -v desktop-file-validate > /dev/null 2>&1; then
  if desktop-file-validate "$DESK/applications/memplan.desktop" > dfv.txt 2>&1; then
    ok "desktop-file-validate accepts the installed memplan.desktop"
  else
    bad "desktop-file-validate"; cat dfv.txt
  fi
else
  skip "desktop-file-validate not installed (apt-get install desktop-file-utils)"
fi
if XDG_DATA_HOME="$DESK" MEMPLAN_BIN_DIR="$WORK/bin" \
  "$ROOT/packaging/linux/install-desktop.sh" --uninstall > undesk.txt 2>&1 \
  && [ ! -e "$DESK/applications/memplan.desktop" ] && [ ! -e "$WORK/bin/memplan" ]; then
  ok "install-desktop.sh --uninstall removes it again"
else
  bad "install-desktop.sh --uninstall"; cat undesk.txt
fi

# Measurements: size, and start time of `memplan estimate --json` (1 warm-up, median of 5)
size="$(du -sh "$WORK/memplan" | cut -f1)"
files="$(find "$WORK/memplan" -type f | wc -l)"
times=()
for i in 0 1 2 3 4 5; do
  t0=$(date +%s%N)
  mp estimate --json > /dev/null 2>&1
  t1=$(date +%s%N)
  [ "$i" -gt 0 ] && times+=("$(( (t1 - t0) / 1000000 ))")
done
median="$("$PY" -c 'import statistics,sys; print(f"{statistics.median(map(int, sys.argv[1:])) / 1000:.2f}")' "${times[@]}")"
echo "smoke: bundle $size in $files files; \`memplan estimate --json\` starts and finishes in ${median} s (median of 5 warm runs, ms: ${times[*]})"
echo "smoke: $skipped skipped"
echo "smoke: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
