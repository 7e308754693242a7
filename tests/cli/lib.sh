# Shared by the tests in tests/cli/ (each sources it: . tests/cli/lib.sh):
# the scratch folder, the peakscope under test, and the two ways a test says
# how its checks went, both of which tools/run-tests counts:
#   check NAME STATUS [FILE...] "ok SUBJECT: NAME", or "not ok SUBJECT: NAME"
#                              and the first lines of each FILE (each line
#                              headed by the file's name when there are
#                              several), for a check that reads better as a
#                              statement of what holds;
#   expect CONDITION WHY       evaluates CONDITION; when it fails, a line
#                              "FAIL: SUBJECT: WHY"; `finish` then prints
#                              "NAME: N checks passed, M failed".
# A message with $(...) in it runs before the condition, so conditions read
# exit statuses saved in variables, never $?.
# Beside them:
#   run ARGS...                runs peakscope ARGS: its stdout in $TMP/out,
#                              its stderr in $TMP/err, its exit status in $rc
#                              (check NAME STATUS "$TMP/out" "$TMP/err" shows
#                              both when the check fails);
#   check_exit NAME RC PATTERN COMMAND...
#                              a check that COMMAND exits RC and prints a
#                              line matching PATTERN (grep -E); when it does
#                              not, the exit status and the output are shown;
#   relay STATUS               for checks that another program printed as its
#                              own "ok" / "not ok" lines: its exit status,
#                              when not 0, fails this test too (no line of its
#                              own, so a failure is counted once);
#   need_torch                 passes (exit 0, one line saying so) when
#                              PyTorch is not importable.
# SUBJECT is the test's name (set it before sourcing: SUBJECT=top); a test
# of two subjects may set it again between its parts (SUBJECT=report).
# The peakscope under test is ${PSC_BUILD_DIR:-build}/peakscope, or the one
# PEAKSCOPE names (PEAKSCOPE=path/to/peakscope tests/cli/test_args.sh); a
# relative path in either is taken from the repository's root.
set -u
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
REPO="$PWD"
BUILD="$(realpath "${PSC_BUILD_DIR:-build}")"
if [ -n "${PEAKSCOPE:-}" ]; then
  PEAKSCOPE="$(realpath "$PEAKSCOPE")"
else
  PEAKSCOPE="$BUILD/peakscope"
fi
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT
# The test's verdict: 1 once a check failed (`finish` and `exit $PSC_STATUS`
# end with it). Its own name keeps it apart from a test's `status=$?`.
PSC_STATUS=0
checks=0
failures=0

check() {
  if [ "$2" = 0 ]; then
    echo "ok ${SUBJECT}: $1"
  else
    echo "not ok ${SUBJECT}: $1"
    local file
    for file in "${@:3}"; do
      [ -f "$file" ] || continue
      if [ $# -gt 3 ]; then
        sed "s|^|    $(basename "$file"): |" "$file" | head -n 12
      else
        sed 's/^/    /' "$file" | head -n 12
      fi
    done
    PSC_STATUS=1
  fi
}

expect() {
  if eval "$1"; then
    checks=$((checks + 1))
  else
    failures=$((failures + 1))
    PSC_STATUS=1
    echo "FAIL: ${SUBJECT}: $2"
  fi
}

# The last line of a test of `expect`s, and its exit status.
finish() {
  echo "$(basename "$0"): $checks checks passed, $failures failed"
  exit "$PSC_STATUS"
}

run() {
  "$PEAKSCOPE" "$@" >"$TMP/out" 2>"$TMP/err"
  rc=$?
}

check_exit() {
  local name=$1 want=$2 pattern=$3 ok=1 rc
  shift 3
  "$@" >"$TMP/check_exit.out" 2>&1
  rc=$?
  [ "$rc" -eq "$want" ] && grep -qE -- "$pattern" "$TMP/check_exit.out" && ok=0
  [ $ok = 0 ] || echo "exit $rc, expected $want and /$pattern/:" | cat - "$TMP/check_exit.out" >"$TMP/check_exit.why"
  check "$name" $ok "$TMP/check_exit.why"
}

relay() {
  [ "$1" = 0 ] || PSC_STATUS=1
}

# Tests that need PyTorch say so and pass when it is not there.
need_torch() {
  if ! /usr/bin/python3 -c 'import torch' 2>/dev/null; then
    echo "$(basename "$0"): skipped: torch is not importable (make deps-torch)"
    exit 0
  fi
}
