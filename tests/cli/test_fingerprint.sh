#!/usr/bin/env bash
# The pricing fingerprint (tools/pricing-fingerprint) follows the code, not its
# layout: on a copy of the pricing sources, a comment edit, a reformat and
# blank lines leave it unchanged, so saved reports keep replaying; a changed
# number, operator or name changes it.
set -u
cd "$(dirname "$0")/../.."
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT
sources=$(ls pricing/*.cc pricing/*.h | grep -v -e saved_price -e pricing_fingerprint.h | sort)

fingerprint() {  # fingerprint DIR: of the sources as they are under DIR
  (cd "$1" && "$OLDPWD/tools/pricing-fingerprint" $sources)
}

fresh() {  # fresh NAME: a copy of the sources under $TMP/NAME
  mkdir -p "$TMP/$1/pricing" && cp $sources "$TMP/$1/pricing/" && echo "$TMP/$1"
}

expect() {  # expect NAME same|differs DIR
  local now
  now=$(fingerprint "$3")
  if { [ "$2" = same ] && [ "$now" = "$base" ]; } || { [ "$2" = differs ] && [ "$now" != "$base" ]; }; then
    echo "ok fingerprint: $1"
  else
    echo "not ok fingerprint: $1 (expected it to stay $base when '$2' is same; got $now)"
  fi
}

base=$(fingerprint "$(fresh base)")
case $base in fnv1a64:????????????????) echo "ok fingerprint: the tool prints fnv1a64:<16 hex digits>" ;;
  *) echo "not ok fingerprint: the tool printed '$base'" ;; esac
[ "$base" = "$(fingerprint .)" ] && echo "ok fingerprint: a copy hashes like the tree" ||
  echo "not ok fingerprint: a copy hashes unlike the tree"

d=$(fresh comment)
sed -i 's|^\(// .*\)$|\1 (reworded)|; 1i // a new comment line\n/* and a block\n   comment */' "$d/pricing/pricing.cc"
expect "comments added and reworded" same "$d"

d=$(fresh layout)
sed -i 's/^  //; s/, /,   /g; s/$/  /' "$d/pricing/pricing.cc"
printf '\n\n\n' >>"$d/pricing/plan.h"
expect "indentation, spacing and blank lines changed" same "$d"

d=$(fresh number)
sed -i '0,/ 0;/s// 1;/' "$d/pricing/pricing.cc"
expect "a number changed" differs "$d"

d=$(fresh operator)
sed -i '0,/^    excess += /s//    excess -= /' "$d/pricing/pricing.cc"
expect "an operator changed" differs "$d"

d=$(fresh name)
sed -i '0,/\bboundary\b/s//boundery/' "$d/pricing/pricing.cc"
expect "a name changed" differs "$d"

d=$(fresh string)
sed -i '0,/"\([a-z_]*\)"/s//"\1x"/' "$d/pricing/price_json.cc"
expect "a string literal changed" differs "$d"
