#!/usr/bin/env bash
# The GPU bundle (tools/gpu-bundle) as `make test` built it: its dry run
# (manifest, scripts' syntax, the CLI from a moved copy with a scrubbed
# environment, the libraries it needs, the size), then a damaged copy that the
# dry run must refuse, and the check refusing to run without a bundle. Prints
# "ok NAME" / "not ok NAME"; skipped (one ok line saying so) without nvcc.
set -u
cd "$(dirname "$0")/../.."
BUILD=${PSC_BUILD_DIR:-build}
BUNDLE="$BUILD/gpu-bundle"
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
if [ ! -e "$BUNDLE/MANIFEST" ]; then
  if [ ! -x "$CUDA_HOME/bin/nvcc" ]; then
    echo "ok gpu bundle: skipped, no nvcc at $CUDA_HOME (the bundle needs the reference workload)"
    exit 0
  fi
  echo "not ok gpu bundle: $BUNDLE/MANIFEST missing (make $BUNDLE/MANIFEST)"
  exit 1
fi
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
status=0

# The dry run's own ok / not ok lines; its closing count would be counted twice.
"$BUNDLE/gpu-check" --bundle "$BUNDLE" --dry-run >"$TMP/dry" 2>&1
rc=$?
grep -v 'checks passed' "$TMP/dry"
[ $rc = 0 ] || status=1

cp -r "$BUNDLE" "$TMP/damaged"
printf 'x' >>"$TMP/damaged/workloads/hf_lora.py"
touch "$TMP/damaged/stray"
if "$TMP/damaged/gpu-check" --dry-run >"$TMP/out" 2>&1; then
  echo "not ok gpu bundle: a damaged copy passes the dry run"
  status=1
elif grep -q 'not ok bundle: every file of the manifest.*hf_lora.py differs' "$TMP/out" &&
     grep -q 'not ok bundle: no file outside the manifest: stray' "$TMP/out"; then
  echo "ok gpu bundle: the dry run refuses a changed file and a stray one"
else
  echo "not ok gpu bundle: the dry run failed a damaged copy for other reasons"
  sed 's/^/    /' "$TMP/out" | head -n 20
  status=1
fi

if tools/gpu-check --out "$TMP/results" >"$TMP/out" 2>&1; then
  echo "not ok gpu bundle: tools/gpu-check runs without a bundle"
  status=1
elif grep -q 'give --bundle DIR' "$TMP/out"; then
  echo "ok gpu bundle: tools/gpu-check without --bundle says to build one, and builds nothing"
else
  echo "not ok gpu bundle: tools/gpu-check without --bundle: $(head -n 1 "$TMP/out")"
  status=1
fi
exit $status
