#!/usr/bin/env bash
# CLI tests for `peakscope price` and `peakscope replay`: golden outputs (their
# figures are worked by hand in docs/pricing.md), exit codes and one-line reasons
# for bad input, report + replay round trips, tampered reports and source drift.
#
#   tests/cli/test_price.sh            uses ${PSC_BUILD_DIR:-build}/peakscope
#   PEAKSCOPE=path/to/peakscope tests/cli/test_price.sh
SUBJECT=price
. "$(dirname "$0")/lib.sh"
DIR=tests/cli/price

# said: how the last `run` ended, for a message
said() { echo "exit $rc; stderr: $(head -n 5 "$TMP/err")"; }

golden() {  # golden EXPECTED ARGS...: exit 0, stdout EXPECTED to the byte
  local expected=$1 differs
  shift
  run "$@"
  diff -u "$expected" "$TMP/out" >"$TMP/diff"
  differs=$?
  expect '[ $rc -eq 0 ] && [ $differs -eq 0 ]' "peakscope $* differs from $expected ($(said)):
$(cat "$TMP/diff")"
}

# bad EXPECTED_RC "EXACT STDERR LINE" ARGS...: fails with exactly that one line
bad() {
  local want_rc=$1 want_line=$2
  shift 2
  run "$@"
  expect '[ $rc -eq $want_rc ] && [ "$(wc -l <"$TMP/err")" -eq 1 ] && [ "$(cat "$TMP/err")" = "$want_line" ]' \
    "peakscope $* exited $rc (expected $want_rc), stderr was
$(sed 's/^/    /' "$TMP/err")
  expected
    $want_line"
}

# ---- goldens ---------------------------------------------------------------
golden "$DIR/design.expected.json" price "$DIR/design.json" --json
golden "$DIR/design.expected.txt" price "$DIR/design.json"
golden "$DIR/parameters.expected.json" price "$DIR/parameters.json" --json
golden "$DIR/split.expected.json" price "$DIR/split.json" --json
# The overlap credit (docs/pricing.md): layer 1 holds 60 - min(60, 500 - 380) = 0,
# layer 0 60 + 60 - 100 - 60 = -40: adapter 0; raw = 200 + 500 = 700.
golden "$DIR/overlap.expected.json" price "$DIR/overlap.json" --json
golden "$DIR/admission.expected.json" price "$DIR/admission.json" --budget 536870912 --json
golden "$DIR/admission.expected.txt" price "$DIR/admission.json" --budget 536870912
golden "$DIR/admission_warm.expected.json" price "$DIR/admission_warm.json" --budget 536870912 --json

# ---- bad input and usage: exit 2, one line naming the file and field --------
B="$DIR/bad"
bad 2 "peakscope price: $B/negative.json: groups[0].boundary_bytes[1]: must be a non-negative integer" \
  price "$B/negative.json"
bad 2 "peakscope price: $B/fraction.json: groups[0].pending_gradient_bytes[1]: must be a non-negative integer" \
  price "$B/fraction.json" --json
bad 2 "peakscope price: $B/length.json: groups[1].boundary_bytes: has 4 entries but the plan has 2 layers (from groups[0].boundary_bytes)" \
  price "$B/length.json"
bad 2 "peakscope price: $B/same_slot.json: groups[1].slot: \"a\" is already trained by groups[0] of this forward; two groups of one forward never train the same slot" \
  price "$B/same_slot.json"
bad 2 "peakscope price: $B/overlap_above.json: workspace_after_gradient_bytes: 501 is more than workspace_bytes (500): what is left of the workspace cannot exceed it" \
  price "$B/overlap_above.json"
bad 2 "peakscope price: $B/child_safety.json: children[0].safety_factor: belongs to the whole wave: give it at the top level only" \
  price "$B/child_safety.json"
bad 2 "peakscope price: $B/shared_layer.json: groups[0].parameters[0].layers[1]: must be a layer index from 0 to 1" \
  price "$B/shared_layer.json"
run price "$B/malformed.json"
expect '[ $rc -eq 2 ] && [ "$(wc -l <"$TMP/err")" -eq 1 ] &&
  grep -q "^peakscope price: $B/malformed.json: not valid JSON: .*line 2, column 1" "$TMP/err"' \
  "malformed JSON message: $(said)"
bad 2 "peakscope price: $DIR/design.json: max_tokens: required field missing: --budget prices a per-token admission plan (docs/pricing.md)" \
  price "$DIR/design.json" --budget 100
bad 2 "peakscope price: $DIR/admission.json: max_tokens: belongs to per-token admission plans (price --budget)" \
  price "$DIR/admission.json"
bad 2 "peakscope price: --budget: '12x' must be a non-negative integer number of bytes" price "$DIR/admission.json" --budget 12x
bad 2 "peakscope price: unknown option '--jsn'" price "$DIR/design.json" --jsn
bad 2 "peakscope price: $TMP/none.json: cannot read: No such file or directory" price "$TMP/none.json"
run price
expect '[ $rc -eq 2 ]' "peakscope price without a plan exited $rc, expected 2"

# ---- reports and replay ------------------------------------------------------
run price "$DIR/design.json" --report "$TMP/design.report.json" --json
expect '[ $rc -eq 0 ] && diff -q "$DIR/design.expected.json" "$TMP/out" >/dev/null' \
  "--report changed the printed figures ($(said))"
run price "$DIR/split.json" --report "$TMP/split.report.json"
expect '[ $rc -eq 0 ]' "price split.json --report: $(said)"
run price "$DIR/overlap.json" --report "$TMP/overlap.report.json"
expect '[ $rc -eq 0 ]' "price overlap.json --report: $(said)"
run replay "$TMP/overlap.report.json"
expect '[ $rc -eq 0 ]' "replay overlap.report.json: $(said)"
run price "$DIR/admission.json" --budget 536870912 --report "$TMP/admission.report.json"
expect '[ $rc -eq 0 ]' "price admission.json --budget --report: $(said)"
# A report that cannot be read is said, and the others are still re-priced: exit 2 at the end.
: >"$TMP/empty.report.json"
run replay "$TMP/empty.report.json" "$TMP/design.report.json"
expect '[ $rc -eq 2 ] && grep -q "^$TMP/design.report.json: ok" "$TMP/out" &&
        grep -q "^peakscope replay: $TMP/empty.report.json: not valid JSON" "$TMP/err"' \
  "replay stopped at an unreadable report ($(said))"
run replay "$TMP/design.report.json" "$TMP/split.report.json" "$TMP/admission.report.json"
expect '[ $rc -eq 0 ] && [ "$(grep -c ": ok$" "$TMP/out")" -eq 3 ]' \
  "replay did not say ok three times ($(said)): $(cat "$TMP/out")"

# A tampered figure: exit 1, the component named.
sed 's/"adapter_gradient": 47960064/"adapter_gradient": 47960063/' "$TMP/design.report.json" >"$TMP/tampered.json"
bad 1 "$TMP/tampered.json: mismatch: price.components.adapter_gradient: report says 47960063, re-priced 47960064" \
  replay "$TMP/tampered.json"
sed 's/"admitted_tokens": 5897/"admitted_tokens": 5898/' "$TMP/admission.report.json" >"$TMP/tampered2.json"
bad 1 "$TMP/tampered2.json: mismatch: admission.admitted_tokens: report says 5898, re-priced 5897" \
  replay "$TMP/tampered2.json"
# One bad report among good ones still fails the run.
run replay "$TMP/design.report.json" "$TMP/tampered.json"
expect '[ $rc -eq 1 ] && grep -q "design.report.json: ok$" "$TMP/out" &&
  grep -q "tampered.json: mismatch: price.components.adapter_gradient" "$TMP/err"' "mixed replay ($(said))"

# Source drift: refused (exit 1) unless allowed.
sed 's/"estimator_fingerprint": "[^"]*"/"estimator_fingerprint": "fnv1a64:0000000000000001"/' \
  "$TMP/design.report.json" >"$TMP/drift.json"
run replay "$TMP/drift.json"
expect '[ $rc -eq 1 ] && grep -q "refused: estimator_fingerprint: the report was priced by fnv1a64:0000000000000001" "$TMP/err"' \
  "drift not refused by name ($(said))"
run replay "$TMP/drift.json" --allow-source-drift
expect '[ $rc -eq 0 ] && grep -q "ok (source drift allowed" "$TMP/out"' "drift allowed but not said ($(said))"
run replay "$TMP/design.report.json" --json
expect '[ $rc -eq 0 ] && grep -q "\"ok\": true" "$TMP/out"' "replay --json ($(said))"

# A report whose plan is bad input: exit 2 naming the field under plan.
sed 's/"boundary_bytes": \[/"boundary_bytes": [-1, /' "$TMP/design.report.json" | tr -d '\n' >"$TMP/badplan.json"
bad 2 "peakscope replay: $TMP/badplan.json: plan.groups[0].boundary_bytes[0]: must be a non-negative integer" \
  replay "$TMP/badplan.json"
bad 2 "peakscope replay: $DIR/design.json: report: must be \"peakscope-price-report\" (is this a price report?)" \
  replay "$DIR/design.json"

# Prices from a calibration (calibrated on the golden fixture trace: 3 layers,
# waves of 1024 and 1536 tokens): goldens, the largest wave under a budget,
# warnings outside the calibrated sizes, bad requests naming the field.
CAL=$DIR/fixture.calibration.json
golden "$DIR/calibrated.expected.json" price --calibration "$CAL" --tokens 1280 --json
golden "$DIR/calibrated.expected.txt" price --calibration "$CAL" --tokens 1280
golden "$DIR/calibrated_admission.expected.json" price --calibration "$CAL" --budget 1MiB --json
run price --calibration "$CAL" --tokens 4096
expect '[ $rc -eq 0 ] && grep -q "^warning: outside the calibrated sizes (tokens per group 1024..1536; outside in tokens)" "$TMP/out"' \
  "no warning outside the calibrated sizes ($(said))"
run price --calibration "$CAL" --budget 1048576
expect '[ $rc -eq 0 ] && grep -q "^largest wave that fits in 1.00 MiB: " "$TMP/out"' "budget line ($(said))"
bad 2 "peakscope price: $CAL: slots[0]: \"b\" was never calibrated (calibrated: a)" \
  price --calibration "$CAL" --tokens 100 --slots b
bad 2 "peakscope price: $CAL: sequences: the lengths add up to 90 tokens, not 100" \
  price --calibration "$CAL" --tokens 100 --sequences 50,40
bad 2 "peakscope price: $CAL: tokens: must be a positive number of tokens" \
  price --calibration "$CAL" --tokens 0
run price --calibration "$CAL" --tokens 10 --budget 1MiB
expect '[ $rc -eq 2 ] && grep -q "give --tokens N (a price) or --budget BYTES" "$TMP/err"' "tokens and budget together ($(said))"
sed 's/"version": 2/"version": 99/' "$CAL" >"$TMP/v99.json"
bad 2 "peakscope price: $TMP/v99.json: calibration.version: 99 is not known (this build reads versions 1 and 2)" \
  price --calibration "$TMP/v99.json" --tokens 100
bad 2 "peakscope price: --budget: '12XB' must be a non-negative integer" \
  price --calibration "$CAL" --budget 12XB
bad 2 "peakscope price: --budget: '18446744073709551615' is too large" \
  price --calibration "$CAL" --budget 18446744073709551615
bad 2 "peakscope price: --max-tokens bounds --budget's search: give it with --budget" \
  price --calibration "$CAL" --tokens 100 --max-tokens 50
bad 2 "peakscope price: $CAL: sequences: the lengths add up to more than 2^40 tokens" \
  price --calibration "$CAL" --tokens 5 --sequences 4611686018427387904,4611686018427387904,4611686018427387904,4611686018427387904,5
bad 2 "peakscope price: $CAL: max_sequence_length: 1099511627776 max_tokens in sequences of at most 1 are 1099511627776 sequences; a wave is priced with at most 1048576: raise the longest sequence or lower the max_tokens" \
  price --calibration "$CAL" --budget 1TiB --max-tokens 1099511627776 --max-sequence-length 1
# A trace not read whole is said to be so by check and calibrate (the waves
# after the cut are missing; a wave the cut falls inside is left out).
head -c 1000 tests/golden/fixture.pstrace >"$TMP/cut.pstrace"
cut_note="$TMP/cut.pstrace is truncated (file ends inside a chunk at byte 136)"
run check --calibration "$CAL" "$TMP/cut.pstrace" --json
expect '[ $rc -eq 0 ] && grep -qF "peakscope check: warning: $cut_note; checked the 0 events before that" "$TMP/err" &&
        grep -qF "$cut_note" "$TMP/out"' "check of a cut trace does not say so ($(said))"
run calibrate "$TMP/cut.pstrace" -o "$TMP/cut.json"
expect 'grep -qF "peakscope calibrate: warning: $cut_note; calibrated from the 0 events before that" "$TMP/err"' \
  "calibrate of a cut trace does not say so ($(said))"
# A cold wave with no warm twin: the first-execution allowance is not
# measured, which calibrate says, and so does every price from it.
run calibrate tests/golden/fixture.pstrace -o "$TMP/fixture.json"
expect '[ $rc -eq 0 ] && grep -q "^peakscope calibrate: warning: no cold wave has a warm twin" "$TMP/err"' \
  "calibrate did not say the first-execution allowance is unmeasured ($(said))"
run price --calibration "$TMP/fixture.json" --tokens 1280 --cold
expect '[ $rc -eq 0 ] && grep -q "^warning: calibration: no cold wave has a warm twin" "$TMP/out"' \
  "a cold price did not say its allowance is unmeasured ($(said))"
# --tokens with --max-sequence-length: the wave packed as --budget's search packs it.
run price --calibration "$CAL" --tokens 1280 --max-sequence-length 512
packed_line=$(head -n 1 "$TMP/out")
run price --calibration "$CAL" --tokens 1280 --sequences 512,512,256
expect '[ $rc -eq 0 ] && [ "$(head -n 1 "$TMP/out")" = "$packed_line" ]' \
  "--max-sequence-length 512 does not price 512,512,256: $packed_line ($(said))"

# A wave split between data-parallel ranks (--rank-shares): the parts add up to
# the wave, and each rank's price is the price of a wave of its part alone; the
# busiest rank's is the wave's. With --budget: the busiest part fits, one token
# more does not.
json_field() { /usr/bin/python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))" "$@"; }
run price --calibration "$CAL" --tokens 3000 --rank-shares 1,1.5,2 --json
shared=$rc
cp "$TMP/out" "$TMP/run.json"
total=""
[ $shared -eq 0 ] && total=$(json_field "$TMP/run.json" 'sum(r["tokens"] for r in d["ranks"])')
expect '[ $shared -eq 0 ] && [ "$total" = 3000 ]' "rank parts do not add up: $total ($(said))"
if [ $shared -eq 0 ]; then
  parts=$(json_field "$TMP/run.json" '[r["tokens"] for r in d["ranks"]]')
  expect '[ "$parts" = "[667, 1000, 1333]" ]' "rank parts: $parts"
  busiest=$(json_field "$TMP/run.json" 'd["busiest_rank"]')
  expect '[ "$busiest" = 2 ]' "busiest rank: $busiest"
  for r in 0 1 2; do
    part=$(json_field "$TMP/run.json" "d['ranks'][$r]['tokens']")
    want=$(json_field "$TMP/run.json" "d['ranks'][$r]['required_bytes']")
    run price --calibration "$CAL" --tokens "$part" --json
    alone=""
    [ $rc -eq 0 ] && alone=$(json_field "$TMP/out" 'd["required_bytes"]')
    expect '[ $rc -eq 0 ] && [ "$alone" = "$want" ]' "rank $r's part priced alone differs: $alone, not $want ($(said))"
  done
  busiest_is_wave=$(json_field "$TMP/run.json" 'd["required_bytes"] == d["ranks"][2]["required_bytes"]')
  expect '[ "$busiest_is_wave" = True ]' "the wave's price is not its busiest rank's"
fi
run price --calibration "$CAL" --budget 2MiB --rank-shares 1,3 --json
admitting=$rc
cp "$TMP/out" "$TMP/admit.json"
fits=""
[ $admitting -eq 0 ] && fits=$(json_field "$TMP/admit.json" 'd["price"]["required_bytes"] <= d["budget_bytes"]')
expect '[ $admitting -eq 0 ] && [ "$fits" = True ]' "the busiest part does not fit ($(said))"
if [ $admitting -eq 0 ]; then
  admitted=$(json_field "$TMP/admit.json" 'd["admitted_tokens"]')
  run price --calibration "$CAL" --tokens $((admitted + 1)) --rank-shares 1,3 --json
  over=""
  [ $rc -eq 0 ] && over=$(json_field "$TMP/out" 'd["required_bytes"] > 2 * 1024 * 1024')
  expect '[ $rc -eq 0 ] && [ "$over" = True ]' "one token more than admitted still fits ($(said))"
fi
bad 2 "peakscope price: --rank-shares: '0' is not a positive number" \
  price --calibration "$CAL" --tokens 100 --rank-shares 1,0
bad 2 "peakscope price: --sequences gives one process's wave; with --rank-shares, give --max-sequence-length" \
  price --calibration "$CAL" --tokens 100 --sequences 50,50 --rank-shares 1,1

finish
