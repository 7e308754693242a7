#!/usr/bin/env bash
# `peakscope export --from/--to/--wave/--summary` (docs/viewers.md "Long
# traces"): windows of the fixture trace export in every streamed format and
# leave no window trace behind; invalid windows exit 2 with one line that says
# why; progress never reaches stderr when it is not a terminal.
#
#   tests/cli/test_export_window.sh            uses ${PSC_BUILD_DIR:-build}/peakscope
#   PEAKSCOPE=path/to/peakscope tests/cli/test_export_window.sh
SUBJECT="export window"
. "$(dirname "$0")/lib.sh"
TRACE=tests/golden/fixture.pstrace

for format in perfetto chrome nsys-sqlite; do
  for window in "--wave 1" "--from 40us --to 80us" "--summary" "--wave 0 --summary"; do
    out="$TMP/out.$format"
    # shellcheck disable=SC2086
    run export "$TRACE" --format "$format" -o "$out" $window
    ok=1
    [ "$rc" -eq 0 ] && [ -s "$out" ] && [ ! -e "$out.window.pstrace" ] && [ ! -s "$TMP/err" ] &&
      grep -q "^peakscope export: window " "$TMP/out" && ok=0
    check "--format $format $window" $ok "$TMP/out" "$TMP/err"
    rm -f "$out"
  done
done

# A window is smaller than the whole, a summary smaller again.
"$PEAKSCOPE" export "$TRACE" --format chrome -o "$TMP/all.json" >/dev/null 2>&1
"$PEAKSCOPE" export "$TRACE" --format chrome -o "$TMP/wave.json" --wave 1 >/dev/null 2>&1
"$PEAKSCOPE" export "$TRACE" --format chrome -o "$TMP/summary.json" --summary >/dev/null 2>&1
all=$(stat -c %s "$TMP/all.json") wave=$(stat -c %s "$TMP/wave.json") summary=$(stat -c %s "$TMP/summary.json")
ok=1
[ "$wave" -lt "$all" ] && [ "$summary" -lt "$all" ] && ok=0
check "chrome sizes whole $all > wave $wave, summary $summary" $ok

refused() {  # refused PATTERN ARGS...: exit 2, one stderr line matching PATTERN
  local pattern=$1
  shift
  run "$@"
  local ok=1
  [ "$rc" -eq 2 ] && [ "$(wc -l <"$TMP/err")" -eq 1 ] && grep -q -- "$pattern" "$TMP/err" && ok=0
  check "${*//$TMP/TMP} is refused" $ok "$TMP/out" "$TMP/err"
}
refused "there is no wave 5 (the trace has 2 waves" export "$TRACE" -f perfetto -o "$TMP/x" --wave 5
refused "beyond the trace's end" export "$TRACE" -f perfetto -o "$TMP/x" --from 1s
refused "\-\-to 1us is before \-\-from 2us" export "$TRACE" -f perfetto -o "$TMP/x" --from 2us --to 1us
refused "'1.5x' is not a time" export "$TRACE" -f perfetto -o "$TMP/x" --from 1.5x
refused "\-\-wave cannot be combined" export "$TRACE" -f perfetto -o "$TMP/x" --wave 0 --to 1ms
refused "\-\-wave: 'one' must be a non-negative integer" export "$TRACE" -f perfetto -o "$TMP/x" --wave one

exit $PSC_STATUS
