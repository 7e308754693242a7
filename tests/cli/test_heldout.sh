#!/usr/bin/env bash
# Held-out accuracy as a test: models built from PyTorch's own modules
# (workloads/heldout/), calibrated on three sizes and checked inside the range and
# up to 3x beyond (tools/accuracy-suite --quick: smaller sizes than the
# published table in docs/accuracy.md). A model passes when check finds no
# under-estimate.
set -u
cd "$(dirname "$0")/../.."
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT
checks=0
failures=0
for model in mha encoder mlp packed; do
  if OUT="$TMP" BUILD="${PSC_BUILD_DIR:-build}" tools/accuracy-suite --quick --models "$model" >"$TMP/$model.log" 2>&1; then
    checks=$((checks + 1))
  else
    failures=$((failures + 1))
    echo "FAIL: held-out $model under-estimated (or did not run):"
    grep -E "UNDER|accuracy-suite:|cold:|warm:" "$TMP/$model.log" | sed 's/^/    /'
  fi
done
echo "test_heldout.sh: $checks checks passed, $failures failed"
[ "$failures" -eq 0 ]
