#!/usr/bin/env bash
# `make install` and `make uninstall` as a user runs them (README.md,
# "Install"): the tree installs into a staging root (DESTDIR) under PREFIX=/usr;
# the installed programs then run from a folder outside the repository with an
# environment that names nothing of it (PATH, LD_LIBRARY_PATH and PYTHONPATH
# point into the staging root only) and, where a mount namespace is allowed,
# with the build folder gone (an empty tmpfs mounted over it), and:
#   - `peakscope --version` names the trace and calibration formats, and the
#     installed recorder library beside it;
#   - `peakscope record` preloads the installed recorder library (from its own
#     prefix, /proc/self/exe -> ../lib), not the build folder's;
#   - a C program built against the installed headers with `pkg-config
#     --cflags --libs peakscope` and linked to the installed estimator library
#     prices a wave exactly as the installed CLI does, and is recorded and
#     reported by the installed CLI;
#   - the Python package, `pip install`ed offline into a folder of its own,
#     finds the installed estimator library, runs the installed CLI through
#     `python3 -m peakscope`, and its annotated LoRA training step
#     (workloads/torch/lora_step.py, copied out of the repository) is
#     recorded and reported by the installed CLI (skipped, saying so, without
#     PyTorch);
#   - the package `make install` put under PREFIX finds its prefix's library;
#   - `make uninstall` with the same variables leaves no file behind.
# Each prints "ok NAME" / "not ok NAME" (or "skip NAME: why").
#
#   tests/cli/test_install.sh     installs from ${PSC_BUILD_DIR:-build}
SUBJECT=install
. "$(dirname "$0")/lib.sh"
BUILD_REL="$(realpath --relative-to=. "$BUILD")"
ROOT="$TMP/root"
WORK="$TMP/work"
mkdir -p "$WORK"


# The installed programs, run in $WORK with nothing of the repository in reach
# but what the command line names.
# Where a mount namespace is allowed (root, or unprivileged namespaces), the
# build folder itself is gone for them: an empty tmpfs is mounted over it.
BUILD_ABS="$(realpath "$BUILD_REL")"
HIDE=()
if /usr/bin/unshare -m /bin/sh -c 'mount -t tmpfs peakscope-hidden "$0"' "$BUILD_ABS" 2>"$TMP/unshare.err"; then
  HIDE=(/usr/bin/unshare -m /bin/sh -c 'mount -t tmpfs peakscope-hidden "$0" && exec "$@"' "$BUILD_ABS")
  echo "ok install: the build folder is hidden from the installed programs (an empty mount over it)"
else
  echo "ok install: build folder hidden # skip: no mount namespace here ($(head -n 1 "$TMP/unshare.err"));" \
    "the environment alone keeps it out of reach"
fi
installed() {
  (cd "$WORK" && env -i HOME="$WORK" PATH="$ROOT/usr/bin:/usr/bin:/bin" LD_LIBRARY_PATH="$ROOT/usr/lib" \
    PYTHONDONTWRITEBYTECODE=1 PKG_CONFIG_PATH="$ROOT/usr/lib/pkgconfig" PKG_CONFIG_SYSROOT_DIR="$ROOT" \
    PKG_CONFIG_LIBDIR="$ROOT/usr/lib/pkgconfig" "${HIDE[@]}" "$@")
}

make -s --no-print-directory install BUILD="$BUILD_REL" DESTDIR="$ROOT" PREFIX=/usr >"$TMP/install.log" 2>&1
rc=$?
# The package's folder (PYTHONDIR: this Python's for /usr), under the staging root.
package="$(find "$ROOT" -path '*/peakscope/__init__.py' | head -n 1)"
PYDIR="$(dirname "$(dirname "${package:-$ROOT/none/none}")")"
PYDIR="${PYDIR#"$ROOT"}"
wanted="usr/bin/peakscope usr/lib/libpeakscope_preload.so usr/lib/libpeakscope_estimator.so
        usr/include/peakscope/peakscope.h usr/include/peakscope/estimator.h usr/lib/pkgconfig/peakscope.pc
        usr/share/man/man1/peakscope.1 ${PYDIR#/}/peakscope/__init__.py ${PYDIR#/}/peakscope/__main__.py
        ${PYDIR#/}/peakscope/trace_tracker.cpp"
missing=""
for f in $wanted; do [ -f "$ROOT/$f" ] || missing="$missing $f"; done
[ $rc = 0 ] && [ -z "$missing" ] && ok=0 || ok=1
[ -n "$missing" ] && echo "missing:$missing" >>"$TMP/install.log"
check "make install DESTDIR=... PREFIX=/usr installs the CLI, both libraries, the headers, peakscope.pc, the man page, the Python package" $ok "$TMP/install.log"
find "$ROOT" -type f | sort >"$TMP/installed.list"

# The man page is the command table's: every command of `peakscope help` has
# its section, and man(1) formats it without a warning.
ok=0
for name in $(installed peakscope help | grep -oE '^  peakscope [a-z-]+' | awk '{print $2}' | uniq); do
  grep -qx ".SS $name" "$ROOT/usr/share/man/man1/peakscope.1" || ok=1
done
if command -v groff >/dev/null; then
  groff -man -Tutf8 -ww -z "$ROOT/usr/share/man/man1/peakscope.1" >"$TMP/groff.log" 2>&1 && [ ! -s "$TMP/groff.log" ] || ok=1
fi
check "peakscope.1 has a section per command of 'peakscope help' and formats without warnings" $ok "$TMP/groff.log"

# ---- the installed CLI -----------------------------------------------------------
installed peakscope --version >"$TMP/version" 2>&1
rc=$?
ok=1
[ $rc = 0 ] && grep -qE '^peakscope [0-9]+\.[0-9]+' "$TMP/version" &&
  grep -qE '^trace format \(\.pstrace\): writes v[0-9]+, reads v[0-9]+' "$TMP/version" &&
  grep -qE '^calibration format .*: writes v[0-9]+, reads v[0-9]+' "$TMP/version" &&
  grep -qxF "recorder library: $ROOT/usr/lib/libpeakscope_preload.so" "$TMP/version" &&
  grep -qE '^  CUDA hooks: yes' "$TMP/version" && ok=0
check "installed peakscope --version names the formats and the installed recorder library" $ok "$TMP/version"

# record from the installed CLI preloads the installed library.
installed peakscope record --host -o "$WORK/env.pstrace" -- sh -c 'echo "$LD_PRELOAD"' >"$TMP/preload" 2>"$TMP/preload.err"
[ "$(head -n 1 "$TMP/preload")" = "$ROOT/usr/lib/libpeakscope_preload.so" ] && ok=0 || ok=1
check "installed peakscope record preloads <prefix>/lib/libpeakscope_preload.so" $ok "$TMP/preload"

# ---- a C API program built with pkg-config ------------------------------------------
cat >"$WORK/capi.c" <<'EOF'
/* Prices a wave through the installed estimator library, then allocates
 * host memory inside a range of the recorder's C API (weak: the program runs
 * without the recorder too). */
#include <peakscope/estimator.h>
#include <peakscope/peakscope.h>
#include <stdio.h>
#include <stdlib.h>
#pragma weak psc_range_push
#pragma weak psc_range_pop

int main(int argc, char** argv) {
  char error[512];
  if (argc != 3) return 2;
  psc_calibration* calibration = psc_calibration_load(argv[1], error, sizeof error);
  if (!calibration) {
    fprintf(stderr, "capi: %s\n", error);
    return 1;
  }
  psc_wave_request request = {0};
  request.size = sizeof request;
  request.tokens = atoll(argv[2]);
  psc_price price = {0};
  price.size = sizeof price;
  if (psc_calibration_price(calibration, &request, &price, error, sizeof error) != PSC_OK) {
    fprintf(stderr, "capi: %s\n", error);
    return 1;
  }
  printf("required_bytes %lld\n", (long long)price.required_bytes);
  psc_calibration_free(calibration);
  void* blocks[8];
  if (psc_range_push) psc_range_push("forward/layer.3");
  for (int i = 0; i < 8; ++i)
    if (posix_memalign(&blocks[i], 64, 1 << 20)) return 1;
  if (psc_range_pop) psc_range_pop();
  for (int i = 0; i < 8; ++i) free(blocks[i]);
  return 0;
}
EOF
cp tests/cli/price/fixture.calibration.json "$WORK/cal.json"
flags="$(installed pkg-config --cflags --libs peakscope 2>"$TMP/cc.log")"
# shellcheck disable=SC2086
installed cc -o "$WORK/capi" "$WORK/capi.c" $flags >>"$TMP/cc.log" 2>&1
rc=$?
ok=1
[ $rc = 0 ] && [[ " $flags " == *" -I$ROOT/usr/include "* ]] && [[ " $flags " == *" -L$ROOT/usr/lib "* ]] &&
  [[ " $flags " == *" -lpeakscope_estimator "* ]] && ok=0
echo "pkg-config --cflags --libs peakscope: $flags" >>"$TMP/cc.log"
check "a C program builds against the installed headers and estimator with pkg-config peakscope" $ok "$TMP/cc.log"

installed ldd "$WORK/capi" >"$TMP/ldd" 2>&1
grep -qF "libpeakscope_estimator.so => $ROOT/usr/lib/libpeakscope_estimator.so" "$TMP/ldd" && ok=0 || ok=1
check "the C program loads the installed estimator library" $ok "$TMP/ldd"

installed peakscope record --host -o "$WORK/capi.pstrace" -- "$WORK/capi" "$WORK/cal.json" 256 >"$TMP/capi.out" 2>"$TMP/capi.err"
rc=$?
installed peakscope price --calibration "$WORK/cal.json" --tokens 256 --json >"$TMP/price.json" 2>>"$TMP/capi.err"
cli_bytes="$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["required_bytes"])' "$TMP/price.json" 2>>"$TMP/capi.err")"
ok=1
[ $rc = 0 ] && [ -n "$cli_bytes" ] && grep -qx "required_bytes $cli_bytes" "$TMP/capi.out" && ok=0
check "the C program prices 256 tokens as the installed 'peakscope price' does ($cli_bytes bytes), recorded" $ok "$TMP/capi.err"

installed peakscope report "$WORK/capi.pstrace" --json >"$TMP/capi.report.json" 2>"$TMP/capi.report.err"
rc=$?
python3 - "$TMP/capi.report.json" >>"$TMP/capi.report.err" 2>&1 <<'EOF'
import json, sys
report = json.load(open(sys.argv[1]))
peak = report["peak_bytes"]
assert peak >= 8 << 20, f"peak {peak}: not the program's 8 MiB"
assert report["peak_site"]["range"] == "forward/layer.3", f"peak in {report['peak_site']['range']!r}"
EOF
python_rc=$?
[ $rc = 0 ] && [ $python_rc = 0 ] && ok=0 || ok=1
check "the installed CLI reports the C program's trace: an 8 MiB peak in its range forward/layer.3" $ok "$TMP/capi.report.err"

# ---- the Python package, pip-installed offline ---------------------------------------
cp -r python "$TMP/python-src"
rm -rf "$TMP/python-src/build" "$TMP/python-src/"*.egg-info
/usr/bin/python3 -m pip install --quiet --no-build-isolation --no-index --no-deps --disable-pip-version-check \
  --root-user-action=ignore --target "$TMP/site" "$TMP/python-src" >"$TMP/pip.log" 2>&1
rc=$?
[ $rc = 0 ] && [ -f "$TMP/site/peakscope/__init__.py" ] && [ -f "$TMP/site/peakscope/trace_tracker.cpp" ] && ok=0 || ok=1
check "pip install --no-build-isolation --no-index --target DIR ./python (offline)" $ok "$TMP/pip.log"

pyinstalled() { installed env PYTHONPATH="$TMP/site" /usr/bin/python3 "$@"; }
pyinstalled -c 'import peakscope, peakscope.calibration as c
print(peakscope.__file__)
print(c.library_path())' >"$TMP/py.where" 2>&1
ok=1
[ "$(sed -n 1p "$TMP/py.where")" = "$TMP/site/peakscope/__init__.py" ] &&
  [ "$(sed -n 2p "$TMP/py.where")" = "$ROOT/usr/lib/libpeakscope_estimator.so" ] && ok=0
check "the pip-installed package finds the installed estimator library (through the peakscope on PATH)" $ok "$TMP/py.where"

pyinstalled -c 'import peakscope
with peakscope.Calibration.load("cal.json") as cal:
    print(cal.price(256).required_bytes)' >"$TMP/py.price" 2>&1
[ "$(cat "$TMP/py.price")" = "$cli_bytes" ] && ok=0 || ok=1
check "the pip-installed package prices 256 tokens as the installed CLI does" $ok "$TMP/py.price"

pyinstalled -m peakscope --version >"$TMP/py.version" 2>&1
cmp -s "$TMP/py.version" "$TMP/version" && ok=0 || ok=1
check "python3 -m peakscope --version runs the installed CLI" $ok "$TMP/py.version"

# Nothing to find: the error lists every path tried.
installed env PATH=/usr/bin:/bin PYTHONPATH="$TMP/site" /usr/bin/python3 -c 'import peakscope
peakscope.Calibration.load("cal.json")' >"$TMP/py.missing" 2>&1
ok=1
grep -q "EstimatorLibraryNotFound: libpeakscope_estimator.so not found; looked at:" "$TMP/py.missing" &&
  grep -q "PEAKSCOPE_ESTIMATOR_LIBRARY" "$TMP/py.missing" && ok=0
check "without an installed CLI the package's error says where it looked" $ok "$TMP/py.missing"

if ! /usr/bin/python3 -c 'import torch' 2>/dev/null; then
  echo "skip install: the pip-installed package's LoRA step recorded by the installed CLI: PyTorch is not importable by /usr/bin/python3"
else
  mkdir -p "$WORK/lora"
  cp workloads/torch/*.py "$WORK/lora/"
  # The step runs as its own script would; then the module it imported as
  # peakscope names its file.
  installed env PYTHONPATH="$TMP/site" peakscope record --host -o "$WORK/lora.pstrace" -- /usr/bin/python3 -c '
import runpy, sys
sys.argv = ["lora/lora_step.py"] + sys.argv[1:]
try:
    runpy.run_path("lora/lora_step.py", run_name="__main__")
finally:
    print("peakscope from", sys.modules["peakscope"].__file__)' --steps 1 --tokens 16,48 --layers 4 --hidden 32 --heads 2 \
    --intermediate 64 --rank 8 --vocab 64 --attention-block 16 >"$TMP/lora.out" 2>&1
  rc=$?
  ok=1
  [ $rc = 0 ] && grep -qx "peakscope from $TMP/site/peakscope/__init__.py" "$TMP/lora.out" && ok=0
  check "the installed CLI records the LoRA step annotated by the pip-installed package" $ok "$TMP/lora.out"
  installed peakscope report "$WORK/lora.pstrace" --json >"$TMP/lora.report.json" 2>"$TMP/lora.report"
  rc=$?
  python3 - "$TMP/lora.report.json" >>"$TMP/lora.report" 2>&1 <<'EOF'
import json, sys
report = json.load(open(sys.argv[1]))
tokens = [w["tokens"] for w in report["waves"]]
assert tokens == [16, 48], f"waves of {tokens} tokens"
assert all(w["complete"] and w["peak_bytes"] > 0 for w in report["waves"]), report["waves"]
assert report["peak_site"]["layer"] is not None, f"peak outside the layers: {report['peak_site']}"
EOF
  python_rc=$?
  [ $rc = 0 ] && [ $python_rc = 0 ] && ok=0 || ok=1
  check "the installed CLI reports the LoRA step: its waves of 16 and 48 tokens, the peak in a layer's range" $ok "$TMP/lora.report"
fi

# The package make install put under the prefix finds that prefix's library.
installed env PATH=/usr/bin:/bin PYTHONPATH="$ROOT$PYDIR" /usr/bin/python3 -c 'import peakscope.calibration as c
print(c.library_path())' >"$TMP/prefix.where" 2>&1
[ "$(cat "$TMP/prefix.where")" = "$ROOT/usr/lib/libpeakscope_estimator.so" ] && ok=0 || ok=1
check "the package installed under PREFIX finds PREFIX/lib/libpeakscope_estimator.so" $ok "$TMP/prefix.where"

# ---- uninstall -------------------------------------------------------------------
# Python may have compiled the package's modules meanwhile: uninstall takes those too.
installed env PYTHONPATH="$ROOT$PYDIR" /usr/bin/python3 -c 'import peakscope.calibration, peakscope.locate' 2>/dev/null
make -s --no-print-directory uninstall BUILD="$BUILD_REL" DESTDIR="$ROOT" PREFIX=/usr >"$TMP/uninstall.log" 2>&1
rc=$?
find "$ROOT" ! -type d >>"$TMP/uninstall.log"
[ $rc = 0 ] && [ -z "$(find "$ROOT" ! -type d)" ] && [ ! -e "$ROOT/usr/include/peakscope" ] &&
  [ ! -e "$ROOT$PYDIR/peakscope" ] && ok=0 || ok=1
check "make uninstall DESTDIR=... PREFIX=/usr leaves no file (of $(wc -l <"$TMP/installed.list") installed)" $ok "$TMP/uninstall.log"
exit $PSC_STATUS
