#!/usr/bin/env bash
# `peakscope export --format torch-snapshot` and `import --from torch-snapshot`
# end to end (docs/viewers.md, "PyTorch memory snapshots"): a real
# `record --host` trace exports host memory as device 0, with a warning, in a
# file where every alloc lies in a live segment (what memory_viz's Allocator
# State History needs); a trace with nothing a snapshot shows is exit 2; the
# real PyTorch snapshot named by PEAKSCOPE_TORCH_SNAPSHOT (when there is one)
# imports to memory_viz's peak. Each prints "ok NAME" / "not ok NAME".
#
#   tests/cli/test_torch_snapshot.sh            uses ${PSC_BUILD_DIR:-build}/peakscope
#   PEAKSCOPE=path/to/peakscope tests/cli/test_torch_snapshot.sh
SUBJECT=torch-snapshot
. "$(dirname "$0")/lib.sh"
PROGRAM="$(dirname "$PEAKSCOPE")/programs/host_pattern"
PYTHON=/usr/bin/python3

# Every alloc inside a segment live at its time, walking forward from what is
# live at the start (segments freed, and blocks freed, before being seen).
cat >"$TMP/segments.py" <<'PY'
import pickle, sys
s = pickle.load(open(sys.argv[1], "rb"))
assert s["device_traces"] and s["device_traces"][0], "no device trace"
for d, trace in enumerate(s["device_traces"]):
    live = []  # [address, size]
    for e in trace:
        a, n = e.get("addr", 0), e["size"]
        if e["action"] in ("segment_alloc", "segment_map"):
            live.append([a, n])
        elif e["action"] in ("segment_free", "segment_unmap"):
            live = [x for x in live if x[0] != a]
        elif e["action"] == "alloc":
            assert any(x[0] <= a < x[0] + x[1] for x in live), "device %d: alloc at %#x in no segment" % (d, a)
print(sum(len(t) for t in s["device_traces"]))
PY

if [ -x "$PROGRAM" ] && [ -x "$PYTHON" ]; then
  "$PEAKSCOPE" record --host -o "$TMP/host.pstrace" -- "$PROGRAM" peak 3 4096 2>"$TMP/err"
  "$PEAKSCOPE" export "$TMP/host.pstrace" --format torch-snapshot -o "$TMP/host.pickle" >/dev/null 2>"$TMP/err"
  rc=$?
  ok=1
  [ $rc = 0 ] && grep -q "warning: host memory .* shown as device 0: 3 allocations, 3 frees" "$TMP/err" &&
    "$PYTHON" "$TMP/segments.py" "$TMP/host.pickle" >/dev/null 2>>"$TMP/err" && ok=0
  check "a record --host trace exports as device 0, every alloc in a segment" $ok "$TMP/err"
else
  check "host export # skip: no $PROGRAM or $PYTHON" 0
fi

# A snapshot with an empty history and no segments imports to a trace with no
# memory: exporting it back is refused.
printf '\x80\x04}\x94\x8c\rdevice_traces\x94]\x94]\x94as.' >"$TMP/empty.pickle"
"$PEAKSCOPE" import "$TMP/empty.pickle" --from torch-snapshot -o "$TMP/empty.pstrace" >/dev/null 2>"$TMP/err"
"$PEAKSCOPE" export "$TMP/empty.pstrace" --format torch-snapshot -o "$TMP/empty.out.pickle" >/dev/null 2>"$TMP/err"
rc=$?
ok=1
[ $rc = 2 ] && grep -q "nothing to export as a memory snapshot" "$TMP/err" && [ ! -e "$TMP/empty.out.pickle" ] && ok=0
check "a trace with nothing a snapshot shows is exit 2, no file" $ok "$TMP/err"

# The public snapshot MAGMA27/assignment2-systems memory_snapshot.pickle (commit
# 15883f2b, MIT), where PEAKSCOPE_TORCH_SNAPSHOT names a copy of it.
REAL=${PEAKSCOPE_TORCH_SNAPSHOT:-}
if [ -n "$REAL" ] && [ -f "$REAL" ]; then
  "$PEAKSCOPE" import "$REAL" --from torch-snapshot -o "$TMP/real.pstrace" >/dev/null 2>"$TMP/err"
  ok=1
  "$PEAKSCOPE" report "$TMP/real.pstrace" 2>"$TMP/err" | grep -q "^peak .*(13923997700 bytes)" && ok=0
  check "the real PyTorch snapshot peaks at memory_viz's 13,923,997,700 bytes" $ok "$TMP/err"
else
  check "real snapshot # skip: PEAKSCOPE_TORCH_SNAPSHOT names no file (${REAL:-unset})" 0
fi
exit $PSC_STATUS
