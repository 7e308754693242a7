#!/usr/bin/env bash
# Random held-out models of several gradient groups as a test: one seed of
# random_models.draw_groups (tools/accuracy-groups; `make accuracy-groups`
# runs 10), calibrated on waves of several groups and on one-group waves,
# checked on waves of group sizes never calibrated, in their backward order.
#   5  packed attention (1 head), three slots, accumulating, 1 thread
# It passes when neither calibration prices a wave under its measured peak,
# every calibrated group size waited for another group's backward (calibrate
# says nothing of sizes that never did), calibrate took the packed recipe's
# waves (no note asks for them, no longest-sequence bound), and the
# calibration from waves of several groups measured that each run freed its
# own group's boundaries; and tools/accuracy-recheck prices the stored runs
# again to the same figures.
SUBJECT="random held-out groups"
. "$(dirname "$0")/lib.sh"
need_torch
OUT="$TMP" BUILD="$BUILD" tools/accuracy-groups --seeds 5 >"$TMP/table" 2>"$TMP/progress"
groups=$?
# The same stored runs priced again by tools/accuracy-recheck, the build
# beside itself: for each calibration two rows of the same 12 waves, none
# under, the table's maximum, and no wave priced differently (pricing is
# deterministic).
tools/accuracy-recheck --builds "$BUILD $BUILD" "$TMP" >"$TMP/recheck" 2>/dev/null
rechecked=$?
# Calibrated afresh by the same build (--recalibrate), the same rows.
tools/accuracy-recheck --recalibrate --builds "$BUILD" "$TMP" >"$TMP/recalibrated" 2>&1
recalibrated=$?
expect '[ $groups -eq 0 ]' "tools/accuracy-groups exited $groups"
expect '[ $rechecked -eq 0 ]' "tools/accuracy-recheck exited $rechecked: $(cat "$TMP/recheck")"
for pair in "groups cal.json" "single single.json"; do
  read -r cal file <<<"$pair"
  row=$(awk -v cal="$cal" '$1 == 5 && $2 == cal { print; exit }' "$TMP/table")
  read -r _ _ _ under _ _ _ table_max _ <<<"$row"
  expect '[ -n "$row" ] && [ "$under" = 0 ]' "seed 5 calibrated on $cal under-estimated (or did not run): ${row:-no row}"
  rows=$(awk -v f="$file" '$2 == f' "$TMP/recheck")
  unlike=$(awk -v m="$table_max" '$4 != 12 || $5 != 0 || $8 != m || $9 != 0' <<<"$rows")
  expect '[ "$(wc -l <<<"$rows")" = 2 ] && [ -z "$unlike" ]' \
    "recheck of $file differs from the table (max $table_max): $rows"
  again=$(awk -v f="$file" '$2 == f' "$TMP/recalibrated")
  expect '[ $recalibrated -eq 0 ] && [ -n "$again" ] && [ "$again" = "$(head -n 1 <<<"$rows")" ]' \
    "recalibrated $file differs from the stored calibration's row: ${again:-$(cat "$TMP/recalibrated")}"
done
expect '! grep -q "group sizes; at the others" "$TMP/seed-5/calibrate-groups.log"' \
  "calibrate noted a group size that never waited: $(grep note "$TMP/seed-5/calibrate-groups.log")"
# The packed calibration follows the README's recipe (groups of one
# sequence, of a middle size and as long as the packer's longest, a group of
# many short ones): calibrate neither asks for it nor bounds a longer longest
# sequence by l_max^2 / rho_min.
expect '[ -s "$TMP/seed-5/calibrate-groups.log" ] &&
        ! grep -q -e "note: packed waves at" -e "priced with its squares bounded" -e "note: one size of one sequence" \
          "$TMP/seed-5/calibrate-groups.log"' \
  "calibrate did not take the packed recipe's waves: $(grep note "$TMP/seed-5/calibrate-groups.log")"
expect 'grep -q "\"runs_free_boundaries\": true" "$TMP/seed-5/cal.json"' \
  "the calibration did not measure that runs free their boundaries"
expect '! grep -q "runs_free_boundaries" "$TMP/seed-5/single.json"' \
  "a calibration from one-group waves claims runs free their boundaries"
if [ "$PSC_STATUS" != 0 ]; then
  echo "tools/accuracy-groups exited $groups:"
  sed 's/^/    /' "$TMP/table" "$TMP/progress" | tail -n 40
fi
finish
