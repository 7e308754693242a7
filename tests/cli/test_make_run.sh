#!/usr/bin/env bash
# What `make run` prints after the build (tools/run-default): the whole loop
# on the embedded LoRA step in at most 80 lines, the peak's answer in the
# report's first 15 lines, no under-estimate on the waves it did not see, an
# admitted wave, the viewer files written, and nothing growing across its two
# optimizer steps.
SUBJECT="make run"
. "$(dirname "$0")/lib.sh"
need_torch

OUT="$TMP/out" BUILD="$BUILD" tools/run-default >"$TMP/run.txt" 2>&1
check "tools/run-default runs the loop" $? "$TMP/run.txt"
lines=$(wc -l <"$TMP/run.txt")
[ "$lines" -le 80 ]
check "its output after the build is at most 80 lines ($lines)" $?
# The report starts at its "== 2. report" line; its peak line within 15 lines.
peak_line=$(awk '/^== 2\. report/ { start = NR } start && /^peak / { print NR - start; exit }' "$TMP/run.txt")
[ -n "$peak_line" ] && [ "$peak_line" -le 15 ]
check "the peak is within the report's first 15 lines (line ${peak_line:-absent})" $?
grep -q '^under_estimates 0$' "$TMP/run.txt"
check "the waves it did not calibrate on are never under-estimated" $?
grep -qE '^largest wave that fits in 64\.00 MiB: [0-9]+ tokens' "$TMP/run.txt"
check "it admits the largest wave that fits 64 MiB" $?
missing=""
for f in default.html default.perfetto-trace default.nvtxt default.report.json default.calibration.json; do
  [ -s "$TMP/out/$f" ] || missing+=" $f"
done
[ -z "$missing" ]
check "it writes the viewer files, the JSON report and the calibration${missing:+ (missing:$missing)}" $?
grep -qE '^growth across optimizer steps: nothing grows over 2 step ends ' "$TMP/run.txt"
check "the report compares its optimizer steps and finds nothing growing" $?
# Folded layers: one row for the identical layers, one for the layer at the peak.
grep -qE '^ +0-30 ' "$TMP/run.txt"
check "identical layers share one row of the report's layer table" $?
exit $PSC_STATUS
