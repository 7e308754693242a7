#!/usr/bin/env bash
# Every subcommand's command line reads the same (cli/args.h): -h and
# --help print its usage on stdout and exit 0; an unknown option and an option
# without its value exit 2 with a first stderr line that names the option.
#
#   tests/cli/test_args.sh            uses ${PSC_BUILD_DIR:-build}/peakscope
#   PEAKSCOPE=path/to/peakscope tests/cli/test_args.sh
SUBJECT=args
. "$(dirname "$0")/lib.sh"
TRACE=tests/golden/fixture.pstrace
PLAN=tests/cli/price/design.json
CAL=tests/cli/price/fixture.calibration.json

# help CMD ARGS...: ARGS (ending in -h or --help) print "usage: peakscope CMD" on stdout, nothing on stderr
help() {
  local cmd=$1
  shift
  run "$@"
  local ok=1
  [ "$rc" -eq 0 ] && [ ! -s "$TMP/err" ] && head -n 1 "$TMP/out" | grep -q "^usage: peakscope $cmd" && ok=0
  check "peakscope $* prints the usage of $cmd and exits 0" $ok "$TMP/out" "$TMP/err"
}

# refused LINE ARGS...: exit 2 and LINE, exactly, first on stderr
refused() {
  local line=$1
  shift
  run "$@"
  local ok=1
  [ "$rc" -eq 2 ] && [ "$(head -n 1 "$TMP/err")" = "$line" ] && [ ! -s "$TMP/out" ] && ok=0
  check "peakscope $* exits 2 with \"$line\"" $ok "$TMP/out" "$TMP/err"
}

# The commands, as "NAME ARGS..." with ARGS enough to reach the parser.
for cmd in record report export import price calibrate check replay; do
  for flag in -h --help; do help "$cmd" "$cmd" "$flag"; done
done
# Help wins wherever it comes among the other arguments; price's calibration
# mode prints price's one help (tests/cli/test_help.sh).
help report report "$TRACE" --json -h
help export export "$TRACE" --format chrome --help
help price price --calibration "$CAL" --tokens 100 -h
help price price --calibration "$CAL" --help
run price -h
ok=1
grep -q "^ *peakscope price --calibration" "$TMP/out" && ok=0
check "peakscope price -h also names the calibration mode" $ok "$TMP/out" "$TMP/err"
run export -h
ok=1
grep -q "^formats:" "$TMP/out" && ok=0
check "peakscope export -h lists the formats" $ok "$TMP/out" "$TMP/err"

# Unknown options: the reason, naming the option, on the first line.
refused "peakscope record: unknown option '--no-such-option'" record --no-such-option true
refused "peakscope report: unknown option '--no-such-option'" report "$TRACE" --no-such-option
refused "peakscope export: unknown option '--no-such-option'" export "$TRACE" --no-such-option
refused "peakscope import: unknown option '--no-such-option'" import "$TRACE" --no-such-option
refused "peakscope price: unknown option '--no-such-option'" price "$PLAN" --no-such-option
refused "peakscope price: unknown option '--no-such-option'" price --calibration "$CAL" --no-such-option
refused "peakscope calibrate: unknown option '--no-such-option'" calibrate "$TRACE" --no-such-option
refused "peakscope check: unknown option '--no-such-option'" check --calibration "$CAL" --no-such-option
refused "peakscope replay: unknown option '--no-such-option'" replay "$PLAN" --no-such-option

# An option as the last argument, without its value (replay has flags only).
refused "peakscope record: -o needs a value" record -o
refused "peakscope record: --level needs a value" record --level
refused "peakscope report: --top needs a value" report "$TRACE" --top
refused "peakscope export: --format needs a value" export "$TRACE" --format
refused "peakscope import: --from needs a value" import "$TRACE" --from
refused "peakscope price: --budget needs a value" price "$PLAN" --budget
refused "peakscope price: --tokens needs a value" price --calibration "$CAL" --tokens
refused "peakscope calibrate: -o needs a value" calibrate "$TRACE" -o
refused "peakscope check: --calibration needs a value" check "$TRACE" --calibration

# Positionals: one trace at a time where the command reads one; "-" and
# anything after "--" are positionals, not options.
# report and export read several (a run): each must be a trace.
refused "peakscope export: other: cannot read: No such file or directory at byte 0" export "$TRACE" other \
  --format chrome -o "$TMP/run.json"
refused "peakscope report: other: cannot read: No such file or directory at byte 0" report "$TRACE" other
refused "peakscope report: no trace given" report --json
refused "peakscope price: one plan at a time ('$PLAN' and 'other')" price "$PLAN" other
run report -
ok=1
[ "$rc" -eq 2 ] && ! grep -q "unknown option" "$TMP/err" && grep -q "^peakscope report: -" "$TMP/err" && ok=0
check "peakscope report - reads a trace named -" $ok "$TMP/out" "$TMP/err"
run report -- --json
ok=1
[ "$rc" -eq 2 ] && grep -q "^peakscope report: --json" "$TMP/err" && ok=0
check "peakscope report -- --json reads a trace named --json" $ok "$TMP/out" "$TMP/err"

# Values: counts and bytes are checked where they are read.
refused "peakscope report: --top: 'q' must be a non-negative integer" report "$TRACE" --top q
refused "peakscope price: --budget: '-0' must be a non-negative integer" price --calibration "$CAL" --budget -0
refused "peakscope price: --budget: '8EiB' must be a non-negative integer" price --calibration "$CAL" --budget 8EiB
refused "peakscope price: --budget: '99999999999TiB' is too large" price --calibration "$CAL" --budget 99999999999TiB
# Every number goes through cli/args.h: the error names the option.
refused "peakscope export: --wave: 'x' must be a non-negative integer (a wave's number: 0, 1, ...)" \
  export "$TRACE" --format chrome -o "$TMP/w.json" --wave x
refused "peakscope export: --wave: ' 1' must be a non-negative integer (a wave's number: 0, 1, ...)" \
  export "$TRACE" --format chrome -o "$TMP/w.json" --wave " 1"
refused "peakscope export: --wave: '4294967296' is larger than any wave's number" \
  export "$TRACE" --format chrome -o "$TMP/w.json" --wave 4294967296
refused "peakscope calibrate: --safety: '1.5x' is not a factor between 1 and 64" calibrate "$TRACE" -o "$TMP/c.json" --safety 1.5x
refused "peakscope calibrate: --safety: '65' is not a factor between 1 and 64" calibrate "$TRACE" -o "$TMP/c.json" --safety 65
refused "peakscope report: --timeline: '1000001' points; at most 1000000" report "$TRACE" --timeline 1000001
refused "peakscope calibrate: --safety: 'nan' is not a factor between 1 and 64" calibrate "$TRACE" -o "$TMP/c.json" --safety nan
refused "peakscope price: --rank-shares: '0' is not a positive number" price --calibration "$CAL" --tokens 64 --rank-shares 1,0
refused "peakscope price: --rank-shares: 'inf' is not a positive number" price --calibration "$CAL" --tokens 64 --rank-shares inf
refused "peakscope price: --rank-shares: '' is not a positive number" price --calibration "$CAL" --tokens 64 --rank-shares 1,

exit $PSC_STATUS
