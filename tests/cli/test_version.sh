#!/usr/bin/env bash
# `peakscope --version` / `peakscope version`: the version written in
# python/peakscope/_version.py, the trace format a recording really has, the
# calibration format, and what the recorder library has, read from the library
# `record` would preload (so a library without the hooks says no, and a CLI
# with no library beside it says where it looked, as `record` does). Each
# prints "ok NAME" / "not ok NAME".
#
#   tests/cli/test_version.sh            uses ${PSC_BUILD_DIR:-build}/peakscope
#   PEAKSCOPE_UNDER_TEST=path/to/peakscope tests/cli/test_version.sh
SUBJECT=version
. "$(dirname "$0")/lib.sh"
PSC="$(realpath "${PEAKSCOPE_UNDER_TEST:-$PEAKSCOPE}")"
BUILD="$(dirname "$PSC")"
PROGRAM="$BUILD/programs/host_pattern"

"$PSC" --version >"$TMP/version" 2>"$TMP/err"
rc=$?
"$PSC" version >"$TMP/version2" 2>>"$TMP/err"
rc2=$?
[ $rc = 0 ] && [ $rc2 = 0 ] && [ ! -s "$TMP/err" ] && cmp -s "$TMP/version" "$TMP/version2" && ok=0 || ok=1
check "peakscope --version and peakscope version print the same, exit 0, nothing on stderr" $ok "$TMP/err"

wanted="$(sed -n 's/^__version__ = "\([^"]*\)"$/\1/p' python/peakscope/_version.py)"
[ -n "$wanted" ] && [ "$(head -n 1 "$TMP/version")" = "peakscope $wanted" ] && ok=0 || ok=1
check "the first line is 'peakscope $wanted' (python/peakscope/_version.py)" $ok "$TMP/version"

# The trace format it says it writes is the one in a trace it records (the
# header's version, bytes 8-9 little-endian).
"$PSC" record --host -o "$TMP/t.pstrace" -- "$PROGRAM" peak 4 1000 >/dev/null 2>"$TMP/err"
written="$(od -An -tu2 -j8 -N2 "$TMP/t.pstrace" | tr -d ' ')"
grep -qE "^trace format \(\.pstrace\): writes v$written, reads v1 to v$written\$" "$TMP/version" && ok=0 || ok=1
check "the trace format line names the version a recorded trace has (v$written) and the versions read" $ok "$TMP/version"

# The calibration format: what it says it reads is what `price` accepts.
cal_line="$(grep -E '^calibration format \(calibrate -o\): writes v[0-9]+, reads v[0-9]+ to v[0-9]+$' "$TMP/version")"
oldest="$(echo "$cal_line" | sed -E 's/.*reads v([0-9]+) to.*/\1/')"
newest="$(echo "$cal_line" | sed -E 's/.*writes v([0-9]+),.*/\1/')"
ok=1
if [ -n "$cal_line" ]; then
  ok=0
  for v in $((oldest - 1)) "$oldest" "$newest" $((newest + 1)); do
    python3 - "$v" tests/cli/price/fixture.calibration.json "$TMP/cal.v$v.json" <<'EOF'
import json, sys
calibration = json.load(open(sys.argv[2]))
calibration["version"] = int(sys.argv[1])
json.dump(calibration, open(sys.argv[3], "w"))
EOF
    "$PSC" price --calibration "$TMP/cal.v$v.json" --tokens 64 >/dev/null 2>>"$TMP/cal.err"
    got=$?
    if [ "$v" -lt "$oldest" ] || [ "$v" -gt "$newest" ]; then
      [ $got = 2 ] || ok=1
    else
      [ $got = 0 ] || ok=1
    fi
  done
fi
check "the calibration line (v$oldest to v$newest) is what price accepts; v$((oldest - 1)) and v$((newest + 1)) are refused" $ok "$TMP/cal.err"

library="$(realpath "$BUILD/libpeakscope_preload.so")"
ok=1
grep -qxF "recorder library: $library" "$TMP/version" &&
  grep -qxF "  CUDA hooks: yes (runtime, driver, VMM, pools, PyTorch pluggable allocator)" "$TMP/version" &&
  grep -qE '^  NVTX injection: yes' "$TMP/version" && grep -qE '^  CUPTI: yes \(CUPTI [0-9]+' "$TMP/version" &&
  grep -qE '^  host allocations \(--host\): yes' "$TMP/version" && ok=0
check "the build's recorder library: CUDA hooks, NVTX injection, CUPTI, host allocations" $ok "$TMP/version"

# A library without the hooks (the estimator's) says no to each, from its symbols.
PEAKSCOPE_PRELOAD="$BUILD/libpeakscope_estimator.so" "$PSC" version >"$TMP/other" 2>&1
ok=1
grep -q '^recorder library: .*libpeakscope_estimator.so (from $PEAKSCOPE_PRELOAD)$' "$TMP/other" &&
  grep -qx "  CUDA hooks: no" "$TMP/other" && grep -qx "  NVTX injection: no" "$TMP/other" &&
  grep -qx "  CUPTI: no" "$TMP/other" && ok=0
check "a library without the hooks, named by PEAKSCOPE_PRELOAD: CUDA hooks, NVTX, CUPTI no" $ok "$TMP/other"

PEAKSCOPE_PRELOAD="$PWD/README.md" "$PSC" version >"$TMP/text" 2>&1
rc=$?
[ $rc = 0 ] && grep -q "cannot read its symbols: .*README.md: not an ELF file" "$TMP/text" && ok=0 || ok=1
check "a file that is not a library: its symbols cannot be read, said so" $ok "$TMP/text"

# A CLI with no library beside it or in ../lib: version and record name both places.
mkdir -p "$TMP/alone/bin"
cp "$PSC" "$TMP/alone/bin/peakscope"
env -u PEAKSCOPE_PRELOAD "$TMP/alone/bin/peakscope" version >"$TMP/alone.version" 2>&1
env -u PEAKSCOPE_PRELOAD "$TMP/alone/bin/peakscope" record --host -o "$TMP/alone.pstrace" -- true >"$TMP/alone.record" 2>&1
rc=$?
ok=1
looked="looked at $TMP/alone/bin/libpeakscope_preload.so, $TMP/alone/bin/../lib/libpeakscope_preload.so; set PEAKSCOPE_PRELOAD"
grep -qF "recorder library: not found: \`record\` cannot run: cannot find libpeakscope_preload.so ($looked)" \
  "$TMP/alone.version" && [ $rc = 2 ] && grep -qF "$looked" "$TMP/alone.record" && [ ! -e "$TMP/alone.pstrace" ] && ok=0
check "a CLI without its library: version and record (exit 2) list the paths looked at" $ok "$TMP/alone.record"

# ... and finds it in ../lib, as installed.
mkdir -p "$TMP/alone/lib"
cp "$BUILD/libpeakscope_preload.so" "$TMP/alone/lib/"
env -u PEAKSCOPE_PRELOAD "$TMP/alone/bin/peakscope" record --host -o "$TMP/alone.pstrace" -- sh -c 'echo "$LD_PRELOAD"' \
  >"$TMP/alone.record" 2>&1
[ "$(head -n 1 "$TMP/alone.record")" = "$TMP/alone/lib/libpeakscope_preload.so" ] && ok=0 || ok=1
check "a CLI in PREFIX/bin preloads PREFIX/lib/libpeakscope_preload.so" $ok "$TMP/alone.record"

"$PSC" version extra >"$TMP/extra" 2>&1
rc=$?
[ $rc = 2 ] && grep -q "peakscope version: unexpected argument 'extra'" "$TMP/extra" && ok=0 || ok=1
check "peakscope version with an argument: exit 2, named" $ok "$TMP/extra"

"$PSC" help --man >"$TMP/man" 2>&1
[ "$(head -n 1 "$TMP/man")" = ".TH PEAKSCOPE 1 \"\" \"peakscope $wanted\" \"User Commands\"" ] && grep -qx ".SS version" "$TMP/man" &&
  ok=0 || ok=1
check "peakscope help --man: the man page of this version, with the version command" $ok "$TMP/man"
exit $PSC_STATUS
