#!/usr/bin/env bash
# The GPU bundle (tools/gpu-bundle) as `make test` built it: its dry run
# (manifest, scripts' syntax, the CLI from a moved copy with a scrubbed
# environment, the libraries it needs, the size), then a damaged copy that the
# dry run must refuse, and the check refusing to run without a bundle. Prints
# "ok NAME" / "not ok NAME"; skipped (one ok line saying so) without nvcc.
SUBJECT="gpu bundle"
. "$(dirname "$0")/lib.sh"
BUNDLE="$BUILD/gpu-bundle"
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
if [ ! -e "$BUNDLE/MANIFEST" ]; then
  if [ ! -x "$CUDA_HOME/bin/nvcc" ]; then
    check "skipped, no nvcc at $CUDA_HOME (the bundle needs the reference workload)" 0
    exit 0
  fi
  check "$BUNDLE/MANIFEST missing (make $BUNDLE/MANIFEST)" 1
  exit $PSC_STATUS
fi

# The dry run's own ok / not ok lines; its closing count would be counted twice.
"$BUNDLE/gpu-check" --bundle "$BUNDLE" --dry-run >"$TMP/dry" 2>&1
dry=$?
grep -v 'checks passed' "$TMP/dry"
relay $dry

cp -r "$BUNDLE" "$TMP/damaged"
printf 'x' >>"$TMP/damaged/workloads/hf_lora.py"
touch "$TMP/damaged/stray"
"$TMP/damaged/gpu-check" --dry-run >"$TMP/out" 2>&1
damaged=$?
if [ $damaged -eq 0 ]; then
  why="a damaged copy passes the dry run"
elif grep -q 'not ok bundle: every file of the manifest.*hf_lora.py differs' "$TMP/out" &&
     grep -q 'not ok bundle: no file outside the manifest: stray' "$TMP/out"; then
  why=""
else
  why="the dry run failed a damaged copy for other reasons"
fi
{ echo "$why"; cat "$TMP/out"; } >"$TMP/damaged.txt"
ok=1
[ -z "$why" ] && ok=0
check "the dry run refuses a changed file and a stray one" $ok "$TMP/damaged.txt"

tools/gpu-check --out "$TMP/results" >"$TMP/out" 2>&1
unbundled=$?
ok=1
[ $unbundled -ne 0 ] && grep -q 'give --bundle DIR' "$TMP/out" && ok=0
check "tools/gpu-check without --bundle says to build one, and builds nothing" $ok "$TMP/out"
# The held-out models the GPU check adds: drawn from the seed alone, the same
# on every machine, and the commands they would run.
tools/gpu-heldout --bundle "$BUNDLE" --out "$TMP/heldout" --seeds 2 --dry-run >"$TMP/heldout.txt" 2>&1
heldout=$?
ok=1
[ $heldout -eq 0 ] &&
  grep -q '^seed 2: llama 9L h512 8h/kv2 i1536 v32000 r16 docs5; calibrate \[256, 512, 1024, 2048, 4096\]' \
    "$TMP/heldout.txt" && grep -q 'peakscope check --calibration .*seed-2/cal.json .*seed-2/check.pstrace --json' \
    "$TMP/heldout.txt" && ok=0
check "tools/gpu-heldout draws seed 2's model as docs/gpu.md shows it" $ok "$TMP/heldout.txt"
exit $PSC_STATUS
