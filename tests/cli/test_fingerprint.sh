#!/usr/bin/env bash
# The pricing fingerprint (tools/pricing-fingerprint) follows the code, not its
# layout: on a copy of the pricing sources, a comment edit, a reformat and
# blank lines leave it unchanged, so saved reports keep replaying; a changed
# number, operator or name changes it.
SUBJECT=fingerprint
. "$(dirname "$0")/lib.sh"
sources=$(ls pricing/*.cc pricing/*.h | grep -v -e saved_price -e pricing_fingerprint.h | sort)

fingerprint() {  # fingerprint DIR: of the sources as they are under DIR
  (cd "$1" && "$OLDPWD/tools/pricing-fingerprint" $sources)
}

fresh() {  # fresh NAME: a copy of the sources under $TMP/NAME
  mkdir -p "$TMP/$1/pricing" && cp $sources "$TMP/$1/pricing/" && echo "$TMP/$1"
}

compare() {  # compare NAME same|differs DIR: the fingerprint of DIR's sources against the tree's
  local now ok=1
  now=$(fingerprint "$3")
  if { [ "$2" = same ] && [ "$now" = "$base" ]; } || { [ "$2" = differs ] && [ "$now" != "$base" ]; }; then ok=0; fi
  echo "expected $2 as $base, got $now" >"$TMP/compared"
  check "$1" $ok "$TMP/compared"
}

base=$(fingerprint "$(fresh base)")
ok=1
case $base in fnv1a64:????????????????) ok=0 ;; esac
echo "$base" >"$TMP/printed"
check "the tool prints fnv1a64:<16 hex digits>" $ok "$TMP/printed"
tree=$(fingerprint .)
ok=1
[ "$base" = "$tree" ] && ok=0
echo "the copy $base, the tree $tree" >"$TMP/compared"
check "a copy hashes like the tree" $ok "$TMP/compared"

d=$(fresh comment)
sed -i 's|^\(// .*\)$|\1 (reworded)|; 1i // a new comment line\n/* and a block\n   comment */' "$d/pricing/pricing.cc"
compare "comments added and reworded" same "$d"

d=$(fresh layout)
sed -i 's/^  //; s/, /,   /g; s/$/  /' "$d/pricing/pricing.cc"
printf '\n\n\n' >>"$d/pricing/plan.h"
compare "indentation, spacing and blank lines changed" same "$d"

d=$(fresh number)
sed -i '0,/ 0;/s// 1;/' "$d/pricing/pricing.cc"
compare "a number changed" differs "$d"

d=$(fresh operator)
sed -i '0,/^    excess += /s//    excess -= /' "$d/pricing/pricing.cc"
compare "an operator changed" differs "$d"

d=$(fresh name)
sed -i '0,/\bboundary\b/s//boundery/' "$d/pricing/pricing.cc"
compare "a name changed" differs "$d"

d=$(fresh string)
sed -i '0,/"\([a-z_]*\)"/s//"\1x"/' "$d/pricing/price_json.cc"
compare "a string literal changed" differs "$d"
exit $PSC_STATUS
