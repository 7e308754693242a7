#!/usr/bin/env bash
# tools/compare-outputs: one build against itself leaves every output the
# same (exit 0, a "same" line for each of report, calibrate, price, check and
# every export, Perfetto's compared by its inflated packets); a build whose
# report says one line more is caught there and only there (exit 1).
#
#   tests/cli/test_compare_outputs.sh    uses ${PSC_BUILD_DIR:-build}/peakscope
SUBJECT=compare-outputs
. "$(dirname "$0")/lib.sh"
TRACE=tests/golden/fixture.pstrace

mkdir -p "$TMP/a" "$TMP/b"
ln -s "$PEAKSCOPE" "$TMP/a/peakscope"
tools/compare-outputs "$TMP/a" "$TMP/a" "$TRACE" >"$TMP/same" 2>&1
rc=$?
ok=1
if [ $rc = 0 ] && ! grep -q DIFFERS "$TMP/same"; then
  ok=0
  for f in report.txt report.json calibrate.txt price.txt check.txt export.perfetto.packets export.chrome \
    export.html export.nvtxt export.nsys-sqlite.sql export.torch-snapshot; do
    grep -q "^same  *$f " "$TMP/same" || ok=1
  done
fi
check "a build against itself: exit 0, every output the same" $ok "$TMP/same"

# A build whose report prints one line more.
cat >"$TMP/b/peakscope" <<WRAP
#!/usr/bin/env bash
"$PEAKSCOPE" "\$@"; status=\$?
[ "\$1" = report ] && echo "one line more"
exit \$status
WRAP
chmod +x "$TMP/b/peakscope"
tools/compare-outputs "$TMP/a" "$TMP/b" "$TRACE" >"$TMP/differ" 2>&1
rc=$?
[ $rc = 1 ] && [ "$(grep -c DIFFERS "$TMP/differ")" = 2 ] && grep -q "^DIFFERS  report.txt$" "$TMP/differ" &&
  grep -q "^DIFFERS  report.json$" "$TMP/differ" && ok=0 || ok=1
check "a report that differs: exit 1, and only the report's two outputs named" $ok "$TMP/differ"
exit $PSC_STATUS
