#!/usr/bin/env bash
# Renders the HTML export of the fixture trace in headless Chromium (Debian's
# chromium, installed by tools/ensure-deps viewers) and checks the screenshot
# is not blank and the figures in the rendered DOM are `report --json`'s and,
# for the accuracy table, `check --json`'s.
#   tests/html/check_html.sh [PEAKSCOPE] [TRACE]
# Prints "ok NAME" / "not ok NAME"; exits 1 on a failure. Nothing leaves the
# machine: the page is a local file and Chromium runs with networking off.
set -uo pipefail
cd "$(dirname "$0")/../.."
PEAKSCOPE=${1:-${PSC_BUILD_DIR:-build}/peakscope}
TRACE=${2:-tests/golden/fixture.pstrace}
if ! command -v chromium >/dev/null; then
  tools/ensure-deps viewers >&2 || true
fi
if ! command -v chromium >/dev/null; then
  echo "not ok html rendering # chromium is not installed and could not be installed (tools/ensure-deps viewers)"
  exit 1
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# Calibrated on the trace itself, so the page has its accuracy table too.
"$PEAKSCOPE" calibrate "$TRACE" -o "$work/cal.json" >/dev/null || { echo "not ok calibrate"; exit 1; }
"$PEAKSCOPE" export "$TRACE" --format html --calibration "$work/cal.json" -o "$work/report.html" >/dev/null ||
  { echo "not ok html export"; exit 1; }
"$PEAKSCOPE" report "$TRACE" --json >"$work/report.json" || { echo "not ok report --json"; exit 1; }
"$PEAKSCOPE" check --calibration "$work/cal.json" "$TRACE" --json >"$work/check.json"  # exit 1 = an under-estimate
chrome() {
  timeout 120 chromium --headless --no-sandbox --disable-gpu --disable-background-networking \
    --disable-component-update --disable-sync --no-first-run --user-data-dir="$(mktemp -d -p "$work")" \
    --window-size=1280,1600 "$@" "file://$work/report.html" 2>>"$work/chromium.log"
}
chrome --screenshot="$work/shot.png" >/dev/null
chrome --dump-dom >"$work/dom.html"
if [ ! -s "$work/shot.png" ] || [ ! -s "$work/dom.html" ]; then
  echo "not ok chromium rendered nothing"
  tail -n 5 "$work/chromium.log"
  exit 1
fi
echo "ok chromium rendered the report"
/usr/bin/python3 tests/html/check_dom.py "$work/dom.html" "$work/report.json" "$work/shot.png" "$work/check.json"
