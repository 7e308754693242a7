#!/usr/bin/env bash
# What `make run` prints after the build (tools/run-default): the whole loop
# on the embedded LoRA step in at most 80 lines, the peak's answer in the
# report's first 15 lines, no under-estimate on the waves it did not see, an
# admitted wave, the viewer files written, and nothing growing across its two
# optimizer steps.
set -u
cd "$(dirname "$0")/../.."
BUILD="${PSC_BUILD_DIR:-build}"
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT
checks=0
failures=0
pass() { checks=$((checks + 1)); }
fail() { failures=$((failures + 1)); echo "FAIL: make run: $1"; }

if ! /usr/bin/python3 -c 'import torch' 2>/dev/null; then
  echo "test_make_run.sh: skipped: torch is not importable (make deps-torch)"
  exit 0
fi
if ! OUT="$TMP/out" BUILD="$BUILD" tools/run-default >"$TMP/run.txt" 2>&1; then
  fail "tools/run-default failed:"
  tail -n 20 "$TMP/run.txt"
fi
lines=$(wc -l <"$TMP/run.txt")
[ "$lines" -le 80 ] && pass || fail "$lines lines of output, more than 80"
# The report starts at its "== 2. report" line; its peak line within 15 lines.
peak_line=$(awk '/^== 2\. report/ { start = NR } start && /^peak / { print NR - start; exit }' "$TMP/run.txt")
[ -n "$peak_line" ] && [ "$peak_line" -le 15 ] && pass || fail "the peak is not in the report's first 15 lines (${peak_line:-absent})"
grep -q '^under_estimates 0$' "$TMP/run.txt" && pass || fail "held-out check: under-estimates, or no check"
grep -qE '^largest wave that fits in 64\.00 MiB: [0-9]+ tokens' "$TMP/run.txt" && pass || fail "no admitted wave"
for f in default.html default.perfetto-trace default.nvtxt default.report.json default.calibration.json; do
  [ -s "$TMP/out/$f" ] && pass || fail "$f not written"
done
grep -qE '^growth across optimizer steps: nothing grows over 2 step ends ' "$TMP/run.txt" && pass ||
  fail "the report's growth across optimizer steps is missing, or something grows"
# Folded layers: one row for the identical layers, one for the layer at the peak.
grep -qE '^ +0-30 ' "$TMP/run.txt" && pass || fail "identical layer rows are not folded"
echo "test_make_run.sh: $checks checks passed, $failures failed"
[ "$failures" -eq 0 ]
