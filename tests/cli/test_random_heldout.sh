#!/usr/bin/env bash
# Random held-out models as a test: three seeds of workloads/heldout/random_models.py,
# each calibrated on three sizes and checked inside the range and up to 3x
# beyond it (tools/accuracy-random; `make accuracy` runs 30 seeds). A model
# passes when check prices none of its waves under the measured peak.
#   30  packed attention (1 head), accumulating, 1 thread
#    8  grouped-query attention (8 heads on 2), accumulating, 2 threads
#   11  no attention (SwiGLU MLP stack), a step per wave, 1 thread
set -u
cd "$(dirname "$0")/../.."
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT
SEEDS=(30 8 11)
rc=0
OUT="$TMP" BUILD="${PSC_BUILD_DIR:-build}" tools/accuracy-random --seeds "$(IFS=,; echo "${SEEDS[*]}")" \
  >"$TMP/table" 2>"$TMP/progress" || rc=$?
checks=0
failures=0
for seed in "${SEEDS[@]}"; do
  # The table's row: seed, waves, under-estimates, ... (FAILED when it did not run).
  row=$(awk -v seed="$seed" '$1 == seed && NF > 4 { print; exit }' "$TMP/table")
  under=$(awk '{ print $3 }' <<<"$row")
  if [ -n "$row" ] && [ "$under" = 0 ]; then
    checks=$((checks + 1))
  else
    failures=$((failures + 1))
    echo "FAIL: random held-out seed $seed under-estimated (or did not run): ${row:-no row}"
  fi
done
if [ "$failures" -gt 0 ] || [ "$rc" -ne 0 ]; then
  echo "tools/accuracy-random exited $rc:"
  sed 's/^/    /' "$TMP/table" "$TMP/progress" | tail -n 60
  [ "$failures" -eq 0 ] && failures=1
fi
echo "test_random_heldout.sh: $checks checks passed, $failures failed"
[ "$failures" -eq 0 ]
