#!/usr/bin/env bash
# What `peakscope record -o PATH` may replace, and what a trace file may hold
# (docs/recorder.md, "What is promised, how it is tested"): record never
# destroys what it did not write (a text file, a FIFO, a device node, a
# symlink, a folder: exit 2, left as they were; an earlier run's traces,
# PATH's and its children's: only with --force), and a file holding two
# traces (cat a b, a trace after its own end mark, a sequence that starts
# over) is refused by `report` with the byte where the other begins, while
# `head -c N` keeps the first, which reads as it did alone. A file cut inside
# its run header says it is cut; a folder names the .pstrace entries it
# leaves out. Each prints "ok NAME" / "not ok NAME".
#
#   tests/cli/test_record_output.sh            uses ${PSC_BUILD_DIR:-build}/peakscope
#   PEAKSCOPE=path/to/peakscope tests/cli/test_record_output.sh
SUBJECT=record
. "$(dirname "$0")/lib.sh"
PROGRAM="$(dirname "$PEAKSCOPE")/programs/host_pattern"

# record -o OUT [ARGS...]: host_pattern's 50 peak allocations, stderr in err
record() {
  local out=$1
  shift
  "$PEAKSCOPE" record --host "$@" -o "$out" -- "$PROGRAM" peak 50 100000 >/dev/null 2>"$TMP/err"
}

# ---- record -o never destroys what it did not write ------------------------------

# A text file at -o: exit 2 naming it, the file intact byte for byte, the
# command not run; --force does not change that.
printf 'my notes\nline two\n' >"$TMP/notes.txt"
cp "$TMP/notes.txt" "$TMP/notes.copy"
"$PEAKSCOPE" record --host -o "$TMP/notes.txt" -- sh -c "touch '$TMP/ran'" 2>"$TMP/err"
rc=$?
"$PEAKSCOPE" record --host --force -o "$TMP/notes.txt" -- sh -c "touch '$TMP/ran'" 2>>"$TMP/err"
rc_force=$?
ok=1
[ $rc = 2 ] && [ $rc_force = 2 ] && cmp -s "$TMP/notes.txt" "$TMP/notes.copy" && [ ! -e "$TMP/ran" ] &&
  [ "$(wc -l <"$TMP/err")" = 2 ] && grep -q "$TMP/notes.txt exists and is a file that is not a peakscope trace" "$TMP/err" &&
  grep -q "choose another -o" "$TMP/err" && ok=0
check "a file that is not a trace is refused, intact, with or without --force" $ok "$TMP/err"

# An earlier trace at -o: refused without --force (the file and the flag
# named, the trace untouched), replaced with it.
record "$TMP/t.pstrace"
cp "$TMP/t.pstrace" "$TMP/t.copy"
record "$TMP/t.pstrace"
rc=$?
ok=1
[ $rc = 2 ] && [ "$(wc -l <"$TMP/err")" = 1 ] && grep -q "$TMP/t.pstrace already holds a peakscope trace" "$TMP/err" &&
  grep -q -- "--force replaces it" "$TMP/err" && cmp -s "$TMP/t.pstrace" "$TMP/t.copy" && ok=0
check "an earlier trace is kept without --force (exit 2, the flag named)" $ok "$TMP/err"

record "$TMP/t.pstrace" --force
rc=$?
ok=1
[ $rc = 0 ] && grep -q "removed 1 earlier trace: t.pstrace" "$TMP/err" &&
  grep -q "trace written to $TMP/t.pstrace" "$TMP/err" && ! cmp -s "$TMP/t.pstrace" "$TMP/t.copy" &&
  "$PEAKSCOPE" report "$TMP/t.pstrace" >/dev/null 2>&1 && ok=0
check "--force replaces an earlier trace" $ok "$TMP/err"

# An earlier run's child traces beside -o are traces too: listed and kept
# without --force, removed with it.
mkdir "$TMP/kids"
"$PEAKSCOPE" record --host -o "$TMP/kids/k.pstrace" -- "$PROGRAM" fork 2 100000 2>"$TMP/err"
ls "$TMP/kids" >"$TMP/kids.before"
kids=$(grep -c '^k\..*\.p[0-9]*\.pstrace$' "$TMP/kids.before")
rm "$TMP/kids/k.pstrace"  # the children's traces alone are enough to refuse
"$PEAKSCOPE" record --host -o "$TMP/kids/k.pstrace" -- "$PROGRAM" exit 0 2>"$TMP/err"
rc=$?
ok=1
[ "$kids" = 4 ] && [ $rc = 2 ] && [ "$(wc -l <"$TMP/err")" = 1 ] &&
  grep -q "4 earlier peakscope traces beside $TMP/kids/k.pstrace hold this run's names (k\..*\.p[0-9]*\.pstrace, " "$TMP/err" &&
  [ "$(find "$TMP/kids" -name '*.pstrace' | wc -l)" = 4 ] && ok=0
check "an earlier run's child traces are listed and kept without --force" $ok "$TMP/err"
"$PEAKSCOPE" record --host --force -o "$TMP/kids/k.pstrace" -- "$PROGRAM" exit 0 2>"$TMP/err"
rc=$?
ok=1
[ $rc = 0 ] && grep -q "removed 4 earlier traces" "$TMP/err" &&
  [ "$(ls "$TMP/kids")" = "k.pstrace" ] && ok=0
check "--force removes an earlier run's child traces too" $ok "$TMP/err"

# A FIFO, a device node, a symlink, a folder at -o: never unlinked, --force or
# not (as root, `-o /dev/null` used to delete the real one).
mkfifo "$TMP/fifo"
targets=("$TMP/fifo:p")
if [ "$(id -u)" = 0 ] && mknod "$TMP/null" c 1 3 2>/dev/null; then targets+=("$TMP/null:c"); fi
ln -s "$TMP/notes.txt" "$TMP/link.pstrace" && targets+=("$TMP/link.pstrace:l")
mkdir "$TMP/folder.pstrace" && targets+=("$TMP/folder.pstrace:d")
for entry in "${targets[@]}"; do
  target=${entry%:*}
  type=${entry##*:}
  for force in "" --force; do
    "$PEAKSCOPE" record --host $force -o "$target" -- sh -c "touch '$TMP/ran'" 2>"$TMP/err"
    rc=$?
    ok=1
    case $type in p) what="a FIFO" ;; c) what="a character device" ;; l) what="a symbolic link" ;; d) what="a directory" ;; esac
    case $type in
      p) [ -p "$target" ] && [ ! -L "$target" ] ;;
      c) [ -c "$target" ] ;;
      l) [ -L "$target" ] && cmp -s "$TMP/notes.txt" "$TMP/notes.copy" ;;
      d) [ -d "$target" ] && [ ! -L "$target" ] ;;
    esac && [ $rc = 2 ] && [ ! -e "$TMP/ran" ] && [ "$(wc -l <"$TMP/err")" = 1 ] &&
      grep -q "$target exists and is $what" "$TMP/err" && ok=0
    check "$what at -o is left as it was${force:+ (--force)}" $ok "$TMP/err"
  done
done

# ---- a file holding two traces ---------------------------------------------------
SUBJECT=report

record "$TMP/a.pstrace"
"$PEAKSCOPE" record --host -o "$TMP/b.pstrace" -- "$PROGRAM" pairs 1 300 4096 >/dev/null 2>"$TMP/err"
a_size=$(stat -c %s "$TMP/a.pstrace")

# report FILE: exit 2, one line naming the file, "another trace begins at
# byte N", and the head -c that keeps the first; N printed.
refused_at() {
  "$PEAKSCOPE" report "$1" >/dev/null 2>"$TMP/err"
  local rc=$?
  [ $rc = 2 ] && [ "$(wc -l <"$TMP/err")" = 1 ] || return 1
  local n
  n=$(sed -n "s|^peakscope report: $1: another trace begins at byte \([0-9]*\) (.*|\1|p" "$TMP/err")
  [ -n "$n" ] && grep -q "$2" "$TMP/err" && grep -q "head -c $n $1 > first.pstrace" "$TMP/err" && echo "$n"
}
# The report of the first N bytes of FILE is the report of A, but for the path.
first_reads_as() {
  head -c "$2" "$1" >"$TMP/first.pstrace"
  diff <("$PEAKSCOPE" report "$TMP/first.pstrace" 2>&1 | sed "s|$TMP/first.pstrace|TRACE|") \
    <("$PEAKSCOPE" report "$3" 2>&1 | sed "s|$3|TRACE|") >/dev/null
}

cat "$TMP/a.pstrace" "$TMP/b.pstrace" >"$TMP/ab.pstrace"
n=$(refused_at "$TMP/ab.pstrace" "a second file header")
ok=1
[ "$n" = "$a_size" ] && first_reads_as "$TMP/ab.pstrace" "$n" "$TMP/a.pstrace" && ok=0
check "cat a b is refused at b's header; head -c N reads as a" $ok "$TMP/err"

cat "$TMP/a.pstrace" "$TMP/a.pstrace" >"$TMP/aa.pstrace"
n=$(refused_at "$TMP/aa.pstrace" "a second file header")
ok=1
[ "$n" = "$a_size" ] && first_reads_as "$TMP/aa.pstrace" "$n" "$TMP/a.pstrace" && ok=0
check "a trace concatenated with itself is refused; head -c N reads as it" $ok "$TMP/err"

{ cat "$TMP/a.pstrace"; printf 'appended text\n'; } >"$TMP/tail.pstrace"
n=$(refused_at "$TMP/tail.pstrace" "data after the end mark")
ok=1
[ "$n" = "$a_size" ] && first_reads_as "$TMP/tail.pstrace" "$n" "$TMP/a.pstrace" && ok=0
check "data after the end mark is refused where it begins" $ok "$TMP/err"

# A trace the recorder did not close (its closing chunk, which holds the end
# mark, cut off), then its own chunks again without the file header: the
# sequence starts over.
python3 - "$TMP/a.pstrace" "$TMP/open.pstrace" "$TMP/restart.pstrace" <<'PY'
import struct, sys
data = open(sys.argv[1], "rb").read()
header_bytes = struct.unpack_from("<I", data, 12)[0]
ends, at = [], header_bytes
while at + 32 <= len(data):
    at += 32 + struct.unpack_from("<I", data, at + 4)[0]
    ends.append(at)
opened = data[: ends[-2]]  # without the closing chunk
open(sys.argv[2], "wb").write(opened)
open(sys.argv[3], "wb").write(opened + opened[header_bytes:])
PY
open_size=$(stat -c %s "$TMP/open.pstrace")
n=$(refused_at "$TMP/restart.pstrace" "the sequence starts over")
ok=1
[ "$n" = "$open_size" ] && first_reads_as "$TMP/restart.pstrace" "$n" "$TMP/open.pstrace" && ok=0
check "a sequence that starts over is another trace" $ok "$TMP/err"

# Cut inside the run header (the recorder writes it right after the file header).
head -c 180 "$TMP/a.pstrace" >"$TMP/cut.pstrace"
"$PEAKSCOPE" report "$TMP/cut.pstrace" >"$TMP/out" 2>"$TMP/err"
ok=1
grep -q "^status     truncated" "$TMP/out" && grep -q "file ends inside the run header at byte 180" "$TMP/out" && ok=0
check "a file cut inside its run header says it is cut" $ok "$TMP/err"

# A run's folder: the .pstrace entries that are not regular files are named.
mkdir "$TMP/run"
cp "$TMP/a.pstrace" "$TMP/run/rank0.pstrace"
mkfifo "$TMP/run/rank1.pstrace"
ln -s /dev/null "$TMP/run/rank2.pstrace"
timeout 20 "$PEAKSCOPE" report "$TMP/run" >/dev/null 2>"$TMP/err"
rc=$?
ok=1
[ $rc = 0 ] && grep -q "$TMP/run/rank1.pstrace is a FIFO, not a trace file: left out" "$TMP/err" &&
  grep -q "$TMP/run/rank2.pstrace is a symbolic link to a character device, not a trace file: left out" "$TMP/err" &&
  ok=0
SUBJECT="report DIR"
check "a FIFO or a symlink to a device named *.pstrace is named on stderr" $ok "$TMP/err"

exit $PSC_STATUS
