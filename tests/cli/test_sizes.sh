#!/usr/bin/env bash
# `make lint` keeps product sources small (tools/check-size): the tree as it
# is passes; a product file over 600 lines and a function over 80 each fail
# with a line naming the file, the line and the function; braces in comments,
# strings and character literals are not counted; tests/ is not product.
# Each case runs tools/check-size on a small tree of its own.
SUBJECT=sizes
. "$(dirname "$0")/lib.sh"

tree() {  # tree NAME: an empty tree with the layer table, under $TMP/NAME
  local dest="$TMP/$1"
  mkdir -p "$dest/tools" "$dest/common" "$dest/tests"
  cp tools/layers "$dest/tools/"
  echo "$dest"
}

function_of() {  # function_of NAME LINES: a C++ function of LINES lines in all
  echo "int $1(int x) {"
  for ((i = 0; i < $2 - 3; ++i)); do echo "  x += $i;"; done
  echo "  return x;"
  echo "}"
}

# sizes NAME RC PATTERN ROOT: tools/check-size on ROOT exits RC and prints PATTERN
sizes() { check_exit "$1" "$2" "$3" tools/check-size "$4"; }

sizes "the tree passes" 0 '^ok sizes: [0-9]+ product files' .

root=$(tree functions)
{
  function_of exactly_eighty 80
  function_of eighty_one 81
} >"$root/common/f.cc"
sizes "a function of 81 lines fails, named with its file and line" 1 'common/f.cc:81: eighty_one has 81 lines' "$root"
sizes "a function of 80 lines passes (the one of 81 alone is named)" 1 '^not ok sizes: 1 over' "$root"

root=$(tree literals)
{
  echo "// a comment's braces: { { {"
  echo 'const char* open = "{{{";'
  echo "const char brace = '{';"
  echo 'const char* raw = R"x(} { ")x";'
  echo "int big = 1'000'000;"
  function_of after_them 81
} >"$root/common/l.cc"
sizes "braces in comments and literals are not counted" 1 'common/l.cc:6: after_them has 81 lines' "$root"

root=$(tree file)
for ((i = 0; i < 601; ++i)); do echo "// line $i"; done >"$root/common/long.h"
sizes "a file of 601 lines fails" 1 'common/long.h:1: file has 601 lines' "$root"

root=$(tree tests)
for ((i = 0; i < 700; ++i)); do echo "// line $i"; done >"$root/tests/long_test.cc"
sizes "tests/ is not product" 0 '^ok sizes: 0 product files' "$root"
exit $PSC_STATUS
