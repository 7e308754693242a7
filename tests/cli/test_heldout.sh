#!/usr/bin/env bash
# Held-out accuracy as a test: models built from PyTorch's own modules
# (workloads/heldout/), calibrated on three sizes and checked inside the range and
# up to 3x beyond (tools/accuracy-suite --quick: smaller sizes than the
# published table in docs/accuracy.md). A model passes when check finds no
# under-estimate.
SUBJECT=held-out
. "$(dirname "$0")/lib.sh"
for model in mha encoder mlp packed; do
  OUT="$TMP" BUILD="$BUILD" tools/accuracy-suite --quick --models "$model" >"$TMP/$model.log" 2>&1
  suite=$?
  expect '[ $suite -eq 0 ]' "$model under-estimated (or did not run):
$(grep -E "UNDER|accuracy-suite:|cold:|warm:" "$TMP/$model.log" | sed 's/^/    /')"
done
finish
