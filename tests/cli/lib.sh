# Shared by the tests in tests/cli/ (each sources it: . tests/cli/lib.sh):
# the scratch folder, the peakscope under test, and the two ways a test says
# how its checks went, both of which tools/run-tests counts:
#   check NAME STATUS [FILE]   "ok SUBJECT: NAME", or "not ok SUBJECT: NAME"
#                              and FILE's first lines, for a check that
#                              reads better as a statement of what holds;
#   expect CONDITION WHY       evaluates CONDITION; when it fails, a line
#                              "FAIL: SUBJECT: WHY"; `finish` then prints
#                              "NAME: N checks passed, M failed".
# A message with $(...) in it runs before the condition, so conditions read
# exit statuses saved in variables, never $?.
# SUBJECT is the test's name (set it before sourcing: SUBJECT=top).
set -u
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
REPO="$PWD"
BUILD="$(realpath "${PSC_BUILD_DIR:-build}")"
PEAKSCOPE="$BUILD/peakscope"
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
    [ -n "${3:-}" ] && [ -f "$3" ] && sed 's/^/    /' "$3" | head -n 12
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

# Tests that need PyTorch say so and pass when it is not there.
need_torch() {
  if ! /usr/bin/python3 -c 'import torch' 2>/dev/null; then
    echo "$(basename "$0"): skipped: torch is not importable (make deps-torch)"
    exit 0
  fi
}
