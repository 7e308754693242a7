#!/usr/bin/env bash
# `peakscope record` at the edges of a run (docs/recorder.md, "What is
# promised, how it is tested"): a launcher script that ends in exec, Ctrl-C
# from outside, a file size limit standing in for a full disk, a planted
# symlink, an unwritable output. Each prints "ok NAME" / "not ok NAME".
#
#   tests/cli/test_record.sh            uses ${PSC_BUILD_DIR:-build}/peakscope
#   PEAKSCOPE=path/to/peakscope tests/cli/test_record.sh
SUBJECT=record
. "$(dirname "$0")/lib.sh"
PROGRAM="$(dirname "$PEAKSCOPE")/programs/host_pattern"

# events TRACE: the number of events `report --json` read
events() { "$PEAKSCOPE" report --json "$1" 2>/dev/null | python3 -c 'import json,sys; print(sum(json.load(sys.stdin)["trace"]["events_by_kind"].values()))'; }

# A launcher script that ends in `exec`: the shell's file is closed before
# the exec, the program's image writes its own, and record lists both.
cat >"$TMP/launch.sh" <<SCRIPT
#!/bin/bash
exec "$PROGRAM" peak 50 100000
SCRIPT
chmod +x "$TMP/launch.sh"
"$PEAKSCOPE" record --host -o "$TMP/l.pstrace" -- "$TMP/launch.sh" 2>"$TMP/err"
rc=$?
ok=1
[ $rc = 0 ] && grep -q "trace written to $TMP/l.pstrace (.*ended by exec)" "$TMP/err" &&
  grep -q "trace also written: $TMP/l.e1.pstrace" "$TMP/err" && [ "$(events "$TMP/l.e1.pstrace")" = 100 ] && ok=0
check "a launcher script's exec keeps both images' traces" $ok "$TMP/err"

# Ctrl-C reaches the traced program from outside: nothing recorded is lost.
# (A background job of a script starts with SIGINT ignored; env gives it back
# its default, as a terminal's foreground job has it.)
env --default-signal=INT "$PEAKSCOPE" record --host -o "$TMP/i.pstrace" -- "$PROGRAM" hold 40 100000 >"$TMP/out" 2>"$TMP/err" &
record_pid=$!
for _ in $(seq 100); do grep -q ready "$TMP/out" 2>/dev/null && break; sleep 0.05; done
kill -INT "$(pgrep -P "$record_pid")"
wait "$record_pid"
rc=$?
ok=1
[ $rc = 130 ] && [ "$(events "$TMP/i.pstrace")" = 40 ] && ok=0
check "SIGINT flushes, exit 130" $ok "$TMP/err"

# A file size limit as the full disk: record warns, the exit status is the
# program's, and report counts the lost events by reason.
(ulimit -f 64 && exec "$PEAKSCOPE" record --host -o "$TMP/f.pstrace" -- "$PROGRAM" pairs 1 100000 4096) 2>"$TMP/err"
rc=$?
ok=1
[ $rc = 0 ] && grep -q "cannot write trace file $TMP/f.pstrace: File too large (errno 27)" "$TMP/err" &&
  grep -q "warning: [0-9]* events could not be written to $TMP/f.pstrace" "$TMP/err" &&
  "$PEAKSCOPE" report "$TMP/f.pstrace" 2>/dev/null | grep -q "dropped" && ok=0
check "write errors are said, warned about and counted" $ok "$TMP/err"

# A limit the program sets below the trace's own 224-byte header: not even
# the closing chunk fits, yet the header says writes failed (rewritten
# through a mapping) and record warns that the trace could not be closed.
# (The recorder's own lines, past the limit on this stderr file, are left
# unsaid: writing them would raise SIGXFSZ.)
"$PEAKSCOPE" record --host -o "$TMP/h.pstrace" -- "$PROGRAM" fsize 100 1000 2>"$TMP/err"
rc=$?
ok=1
[ $rc = 0 ] && grep -q "warning: writes to $TMP/h.pstrace failed and the trace could not be closed" "$TMP/err" && ok=0
check "a file size limit below the header is flagged and warned about" $ok "$TMP/err"

# A symlink planted at a child's trace name is not listed (nor followed).
echo precious >"$TMP/victim"
ln -s "$TMP/victim" "$TMP/s.p4000000.pstrace"
"$PEAKSCOPE" record --host -o "$TMP/s.pstrace" -- "$PROGRAM" fork 2 100000 2>"$TMP/err"
rc=$?
ok=1
[ $rc = 0 ] && ! grep -q "p4000000" "$TMP/err" && [ "$(cat "$TMP/victim")" = precious ] &&
  [ "$(stat -c %a "$TMP/s.pstrace")" = 600 ] && ok=0
check "planted symlinks are not listed; traces are 0600" $ok "$TMP/err"

# An output that cannot be created: exit 2, one line with the path and errno.
"$PEAKSCOPE" record --host -o "$TMP/missing/x.pstrace" -- "$PROGRAM" exit 0 2>"$TMP/err"
rc=$?
ok=1
[ $rc = 2 ] && [ "$(wc -l <"$TMP/err")" = 1 ] &&
  grep -q "cannot write the trace to $TMP/missing/x.pstrace: No such file or directory (errno 2)" "$TMP/err" && ok=0
check "an unwritable output exits 2 and says why" $ok "$TMP/err"

# A command that cannot run says so once, with the shell's exit codes (126
# found but not runnable, 127 not found), and no trace is looked for.
printf 'not a program\n' >"$TMP/not_runnable"
chmod -x "$TMP/not_runnable"
for case in "126 $TMP/not_runnable Permission denied" "127 $TMP/no_such_program No such file or directory"; do
  read -r want path why <<<"$case"
  "$PEAKSCOPE" record --host -o "$TMP/never.pstrace" -- "$path" 2>"$TMP/err"
  rc=$?
  ok=1
  [ $rc = "$want" ] && [ "$(wc -l <"$TMP/err")" = 1 ] &&
    [ "$(cat "$TMP/err")" = "peakscope record: cannot run '$path': $why" ] && [ ! -e "$TMP/never.pstrace" ] && ok=0
  check "a command that cannot run exits $want with one line" $ok "$TMP/err"
done
"$PEAKSCOPE" record --host -o "" -- /bin/true 2>"$TMP/err"
rc=$?
ok=1
[ $rc = 2 ] && [ "$(cat "$TMP/err")" = "peakscope record: -o: an empty path; give the trace's file name" ] && ok=0
check "an empty -o is refused, naming it" $ok "$TMP/err"

exit $PSC_STATUS
