#!/usr/bin/env bash
# `make lint` keeps includes going down the data flow (tools/layers): the tree
# as it is passes; an include that goes up, an include of a folder the table
# does not place, and a cycle in the table each fail with a line that names
# the problem. Each case runs tools/check-layers on a copy of the tree.
set -u
cd "$(dirname "$0")/../.."
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT

copy() {  # copy NAME: the tree's C++ sources and layer table under $TMP/NAME
  local dest="$TMP/$1"
  mkdir -p "$dest"
  git ls-files -z -- "*.h" "*.cc" "*.cu" | xargs -0 cp --parents -t "$dest"
  mkdir -p "$dest/tools" && cp tools/layers "$dest/tools/"
  echo "$dest"
}

# expect NAME RC PATTERN ROOT: tools/check-layers on ROOT exits RC and prints PATTERN
expect() {
  local name=$1 want=$2 pattern=$3 root=$4 out rc
  out=$(tools/check-layers "$root" 2>&1)
  rc=$?
  if [ "$rc" -eq "$want" ] && grep -qE -- "$pattern" <<<"$out"; then
    echo "ok $name"
  else
    echo "not ok $name (exit $rc, expected $want and /$pattern/):"
    sed 's/^/    /' <<<"$out"
  fi
}

expect "layers: the tree passes" 0 '^ok layers: [0-9]+ files' .

root=$(copy upward)
printf '#include "analysis/analysis.h"\n' >>"$root/traces/reader.h"
expect "layers: traces/ including analysis/ fails, naming file and line" 1 \
  "traces/reader.h:[0-9]+: traces/ includes analysis/, which is not below it" "$root"

root=$(copy recorder)
printf '#include "traces/reader.h"\n' >>"$root/runtime/writer.cc"
expect "layers: the recorder including a reader fails" 1 "runtime/writer.cc:[0-9]+: runtime/ includes traces/" "$root"

root=$(copy exporter)
printf '#include "tools/cli/commands.h"\n' >>"$root/exchange/exporter.h"
expect "layers: an exporter including the CLI fails" 1 "exchange/exporter.h:[0-9]+: exchange/ includes tools/" "$root"

root=$(copy unplaced)
mkdir -p "$root/extras" && printf 'int x;\n' >"$root/extras/x.cc"
printf '#include "extras/x.h"\n' >>"$root/estimator/growth.h"
expect "layers: a folder the table does not place fails" 1 "extras/: holds C\+\+ sources but tools/layers does not place it" "$root"

root=$(copy cycle)
sed -i 's/^format:.*/format: traces/' "$root/tools/layers"
expect "layers: a cycle in the table fails" 2 "cycle: (format -> traces -> format|traces -> format -> traces)" "$root"
