#!/usr/bin/env bash
# `make lint` keeps includes going down the data flow (tools/layers): the tree
# as it is passes; an include that goes up, an include of a folder the table
# does not place, and a cycle in the table each fail with a line that names
# the problem. Each case runs tools/check-layers on a copy of the tree.
SUBJECT=layers
. "$(dirname "$0")/lib.sh"

copy() {  # copy NAME: the tree's C++ sources and layer table under $TMP/NAME
  local dest="$TMP/$1"
  mkdir -p "$dest"
  # Tracked and new files that exist now (a folder may be mid-move).
  git ls-files -z -co --exclude-standard -- "*.h" "*.cc" "*.cpp" "*.cu" |
    while IFS= read -r -d '' f; do [ -e "$f" ] && printf '%s\0' "$f"; done | xargs -0 cp --parents -t "$dest"
  mkdir -p "$dest/tools" && cp tools/layers "$dest/tools/"
  echo "$dest"
}

# layers NAME RC PATTERN ROOT: tools/check-layers on ROOT exits RC and prints PATTERN
layers() { check_exit "$1" "$2" "$3" tools/check-layers "$4"; }

layers "the tree passes" 0 '^ok layers: [0-9]+ files' .

root=$(copy upward)
printf '#include "analysis/analysis.h"\n' >>"$root/traces/reader.h"
layers "traces/ including analysis/ fails, naming file and line" 1 \
  "traces/reader.h:[0-9]+: traces/ includes analysis/, which is not below it" "$root"

root=$(copy recorder)
printf '#include "traces/reader.h"\n' >>"$root/runtime/trace_sink.cc"
layers "the recorder including a reader fails" 1 "runtime/trace_sink.cc:[0-9]+: runtime/ includes traces/" "$root"

root=$(copy exporter)
printf '#include "cli/commands.h"\n' >>"$root/exchange/exporter.h"
layers "an exporter including the CLI fails" 1 "exchange/exporter.h:[0-9]+: exchange/ includes cli/" "$root"

root=$(copy unplaced)
mkdir -p "$root/extras" && printf 'int x;\n' >"$root/extras/x.cc"
printf '#include "extras/x.h"\n' >>"$root/estimator/growth.h"
layers "a folder the table does not place fails" 1 "extras/: holds C\+\+ sources but tools/layers does not place it" "$root"

root=$(copy cycle)
sed -i 's/^format:.*/format: traces/' "$root/tools/layers"
layers "a cycle in the table fails" 2 "cycle: (format -> traces -> format|traces -> format -> traces)" "$root"

# A layer is a top folder: a subfolder's files belong to it (exchange/ may
# have exchange/<format>/), and .cpp files are checked like .cc files.
root=$(copy subfolder)
mkdir -p "$root/exchange/perfetto"
printf '#include "estimator/check.h"\n#include "exchange/exporter.h"\n' >"$root/exchange/perfetto/ok.cc"
layers "a file in a subfolder of a layer may include what its layer may" 0 '^ok layers' "$root"
printf '#include "cli/commands.h"\n' >"$root/exchange/perfetto/up.h"
layers "a file in a subfolder of a layer going up fails" 1 \
  "exchange/perfetto/up.h:1: exchange/ includes cli/, which is not below it" "$root"

root=$(copy cpp)
printf '#include "tests/support/trace_writer.h"\n' >>"$root/python/peakscope/trace_tracker.cpp"
layers "a .cpp file going up fails (python/peakscope/trace_tracker.cpp)" 1 \
  "python/peakscope/trace_tracker.cpp:[0-9]+: python/ includes tests/" "$root"

# include/ is no layer: the public headers, which any folder may include
# ("peakscope/..."), include only each other.
root=$(copy public)
printf '#include "peakscope/estimator.h"\n' >>"$root/format/event.h"
layers "any folder may include a public header (include/peakscope/)" 0 '^ok layers' "$root"
printf '#include "runtime/recorder.h"\n' >>"$root/include/peakscope/peakscope.h"
layers "a public header including a layer fails" 1 \
  "include/peakscope/peakscope.h:[0-9]+: a public header includes runtime/" "$root"

root=$(copy relative)
printf '#include "../estimator/check.h"\n' >>"$root/exchange/exporter.h"
layers "an include climbing with ../ fails" 1 "exchange/exporter.h:[0-9]+: includes a path with '\\.\\./'" "$root"

root=$(copy nested)
printf 'exchange/perfetto: estimator\n' >>"$root/tools/layers"
layers "a table line naming a subfolder is refused" 2 "a layer is a top folder" "$root"
exit $PSC_STATUS
