#!/usr/bin/env bash
# peakscope top: a live view of a trace being written. Follows a LoRA step
# that `record` is writing (its final peak and each wave's measured peak are
# report's, to the byte), records a command itself (its exit status passed
# through), draws its screen in tmux (captured while the step runs, q stops
# it and the command goes on), follows a 2-rank torchrun run (every rank,
# the busiest first), checks `calibrate --follow` against `calibrate` and
# Python's Calibration.reload(), and refuses bad input with exit 2.
SUBJECT=top
. "$(dirname "$0")/lib.sh"
trap 'tmux kill-session -t pstop 2>/dev/null; rm -rf "$TMP"' EXIT
need_torch
STEP=(/usr/bin/python3 "$REPO/workloads/torch/lora_step.py" --steps 2 --tokens 32,128 --layers 8)

# 1. Following a trace another process writes: the follow ends with the
#    recorder's end mark; the final figures are the report's.
"$PEAKSCOPE" record --host -o "$TMP/followed.pstrace" -- "${STEP[@]}" >"$TMP/followed.log" 2>&1 &
recorder=$!
"$PEAKSCOPE" top "$TMP/followed.pstrace" --interval 0.1 >"$TMP/top1.txt" 2>&1
top_status=$?
wait "$recorder"
expect '[ $top_status -eq 0 ]' "following a trace exited $top_status"
expect 'grep -q "^trace .*: closed by the recorder" "$TMP/top1.txt"' "the follow did not end at the end mark"
"$PEAKSCOPE" report "$TMP/followed.pstrace" --json >"$TMP/report1.json"
/usr/bin/python3 - "$TMP/report1.json" "$TMP/top1.txt" <<'PY' >"$TMP/compare1.txt" 2>&1
import json, re, sys
report = json.load(open(sys.argv[1]))
text = open(sys.argv[2]).read()
final = text[text.rindex("peakscope top "):]
peak = int(re.search(r"^peak .*\((\d+) bytes\)", final, re.M).group(1))
rows = re.findall(r"^ +(\d+) +\S+ +\S+ +\S+ \S+ +\S+ \S+ +\S+ \S+ +(\d+)  ", final, re.M)
measured = [int(m) for _, m in rows]
expected = [w["measured_peak_bytes"] for w in report["waves"]]
ok = peak == report["peak_bytes"] and measured == expected and len(expected) == 4
print(f"peak {peak} vs {report['peak_bytes']}; waves {measured} vs {expected}")
sys.exit(0 if ok else 1)
PY
compared=$?
expect '[ $compared -eq 0 ]' "final figures differ from report's: $(cat "$TMP/compare1.txt")"
# While it ran, the follower printed waves as they ended, before the end.
expect '[ "$(grep -cE "^ +[0-3] +(32|128) " "$TMP/top1.txt")" -ge 8 ]' "waves were not printed as they ended"

# 2. Recording a command itself, with a calibration: its exit status comes
#    back, its output goes to PATH.log, each wave is priced as it ends.
"$PEAKSCOPE" calibrate "$TMP/followed.pstrace" -o "$TMP/cal.json" >/dev/null 2>&1
(cd "$TMP" && "$PEAKSCOPE" top --lines --host -o run.pstrace --calibration cal.json --budget 64MiB --interval 0.2 \
  -- /usr/bin/python3 -c 'import sys; print("hello from the command"); sys.exit(3)' >top2.txt 2>&1)
status=$?
expect '[ $status -eq 3 ]' "the command's exit status 3 was not passed through"
expect 'grep -q "hello from the command" "$TMP/run.pstrace.log"' "the command's output is not in PATH.log"
expect 'grep -q "largest wave that fits in 64.00 MiB: [0-9]* tokens" "$TMP/top2.txt"' "no admitted wave with --budget"
(cd "$TMP" && "$PEAKSCOPE" top --lines --host -o step.pstrace --calibration cal.json --interval 0.2 -- "${STEP[@]}" >top3.txt 2>&1)
status=$?
expect '[ $status -eq 0 ]' "top -- CMD of the LoRA step failed"
expect '[ "$(grep -cE "^ +[0-3] +(32|128) .* [+-][0-9.]+%" "$TMP/top3.txt")" -ge 4 ]' "the waves were not priced as they ended"
expect '! grep -q "PEAK OVER ITS PRICE" "$TMP/top3.txt"' "a wave's peak passed its price"
expect '[ -e "$TMP/step.pstrace" ] && "$PEAKSCOPE" report "$TMP/step.pstrace" | grep -q "closed cleanly"' "the recorded trace is not whole"

# 3. The screen, in tmux: drawn while the step runs, q stops the view and the
#    command goes on to close its trace.
if command -v tmux >/dev/null; then
  tmux new-session -d -s pstop -x 120 -y 45 \
    "cd '$TMP' && '$PEAKSCOPE' top --host -o screen.pstrace --interval 0.2 -- ${STEP[*]} --steps 4; sleep 30"
  drawn=0
  for _ in $(seq 1 100); do
    tmux capture-pane -p -t pstop >"$TMP/screen.txt" 2>/dev/null
    if grep -q "^live now" "$TMP/screen.txt" && grep -qE "^ +1 +128 " "$TMP/screen.txt"; then drawn=1; break; fi
    sleep 0.2
  done
  expect '[ $drawn -eq 1 ]' "the screen did not show live bytes and a wave: $(head -c 600 "$TMP/screen.txt")"
  expect 'grep -q "q or Ctrl-C quits" "$TMP/screen.txt"' "the screen does not say how to quit"
  expect 'grep -q "^peak  " "$TMP/screen.txt"' "the screen has no peak"
  tmux send-keys -t pstop q
  stopped=0
  for _ in $(seq 1 50); do
    tmux capture-pane -p -t pstop >"$TMP/after.txt" 2>/dev/null
    if grep -q "^stopped following\|^trace .*: closed" "$TMP/after.txt"; then stopped=1; break; fi
    sleep 0.2
  done
  expect '[ $stopped -eq 1 ]' "q did not stop the view: $(tail -n 5 "$TMP/after.txt")"
  # The step goes on without the view and closes its trace.
  closed=0
  for _ in $(seq 1 150); do
    if "$PEAKSCOPE" report "$TMP/screen.pstrace" 2>/dev/null | grep -q "closed cleanly"; then closed=1; break; fi
    sleep 0.2
  done
  expect '[ $closed -eq 1 ]' "the command did not go on to close its trace after q"
  tmux kill-session -t pstop 2>/dev/null
else
  echo "test_top.sh: screen checks skipped: tmux is not installed"
fi

# 4. calibrate --follow: rewrites the calibration as waves end, never from a
#    wave still running, and ends with calibrate's own file, byte for byte; a
#    Python Calibration loaded early reloads the rewritten file.
"$PEAKSCOPE" record --host -o "$TMP/cal-run.pstrace" -- "${STEP[@]}" >/dev/null 2>&1 &
recorder=$!
/usr/bin/python3 - "$PEAKSCOPE" "$TMP" "$REPO" <<'PY' >"$TMP/follow.txt" 2>&1
import os, subprocess, sys, time
peakscope, tmp, repo = sys.argv[1:4]
sys.path.insert(0, os.path.join(repo, "python"))
import peakscope as ps
follow = subprocess.Popen([peakscope, "calibrate", "--follow", f"{tmp}/cal-run.pstrace", "-o", f"{tmp}/followed.json",
                           "--interval", "0.1"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
cal = None
while cal is None and follow.poll() is None:
    try:
        cal = ps.Calibration.load(f"{tmp}/followed.json")
    except ps.CalibrationError:
        time.sleep(0.05)
first = cal.price(tokens=128).raw_bytes if cal else None
out, _ = follow.communicate()
print(out)
print("exit", follow.returncode)
if cal is not None:
    print("reloaded", cal.reload(), "again", cal.reload())
    fresh = ps.Calibration.load(f"{tmp}/followed.json")
    print("same price after reload", cal.price(tokens=128).raw_bytes == fresh.price(tokens=128).raw_bytes)
PY
wait "$recorder"
"$PEAKSCOPE" calibrate "$TMP/cal-run.pstrace" -o "$TMP/post.json" >/dev/null 2>&1
expect 'grep -q "^exit 0" "$TMP/follow.txt"' "calibrate --follow failed: $(tail -n 3 "$TMP/follow.txt")"
expect 'cmp -s "$TMP/followed.json" "$TMP/post.json"' "the followed calibration differs from calibrate's"
expect '[ "$(grep -c "^after [0-9]* waves*: calibration:" "$TMP/follow.txt")" -ge 2 ]' "the calibration was not rewritten as waves ended"
# "after N waves: calibration: M waves": never a wave that had not ended.
expect '! grep -E "^after ([0-9]+) waves?: calibration: ([0-9]+) waves" "$TMP/follow.txt" | awk "{ if (\$5 + 0 > \$2 + 0) bad = 1 } END { exit !bad }"' \
  "a calibration learnt from a wave still running"
expect 'grep -q "still lacking: a cold wave and a warm wave" "$TMP/follow.txt"' "no line said what the early waves lack"
# After one size of waves, two more are lacking (not "1"); after two, one.
# Which of those states a poll sees depends on the machine's speed (a wave
# of 128 tokens can end between two polls), so: at least one such line, and
# every one adds up to three with the sizes seen.
expect 'grep -qE "still lacking: [12] more token counts? of waves \([12] so far" "$TMP/follow.txt"' \
  "no line said how many more token counts are lacking"
expect '! grep -E "still lacking: [0-9]+ more token counts? of waves \(([0-9]+) so far" "$TMP/follow.txt" |
        sed -E "s/.*lacking: ([0-9]+) more .*\(([0-9]+) so far.*/\1 \2/" | awk "{ if (\$1 + \$2 != 3) bad = 1 } END { exit !bad }"' \
  "the token counts still lacking do not add up to three with those seen"
expect 'grep -q "^reloaded True again False" "$TMP/follow.txt"' "Calibration.reload() did not read the rewritten file once"
expect 'grep -q "^same price after reload True" "$TMP/follow.txt"' "a reloaded calibration prices differently from a fresh load"

# 5. A distributed run under the real torchrun: top -- CMD follows every
#    rank's trace as it appears (and the agent's), the busiest first, and
#    each rank's peak is the run report's.
TORCHRUN=$(command -v torchrun || true)
if [ -n "$TORCHRUN" ] && /usr/bin/python3 -c 'import torch.distributed as d; assert d.is_gloo_available()' 2>/dev/null; then
  mkdir -p "$TMP/ranks"
  (cd "$TMP/ranks" && "$PEAKSCOPE" top --lines --host -o run.pstrace --interval 0.2 -- "$TORCHRUN" --redirects 1 --tee 1 \
    --nproc_per_node 2 "$REPO/workloads/torch/ddp_lora.py" --tokens 128,256 --layers 4 >top.txt 2>&1)
  status=$?
  expect '[ $status -eq 0 ]' "top -- torchrun exited $status: $(tail -n 3 "$TMP/ranks/top.txt")"
  expect 'grep -q "3 traces, the busiest first" "$TMP/ranks/top.txt"' "top did not follow the agent and both ranks"
  "$PEAKSCOPE" report "$TMP/ranks" --json >"$TMP/ranks/report.json" 2>/dev/null
  /usr/bin/python3 - "$TMP/ranks/report.json" "$TMP/ranks/top.txt" <<'PY' >"$TMP/ranks/compare.txt" 2>&1
import json, re, sys
report = json.load(open(sys.argv[1]))
text = open(sys.argv[2]).read()
table = text[text.rindex("traces, the busiest first"):]
# Rows: rank, host, pid, live now, peak (each a number and a unit), waves.
rows = re.findall(r"^ +(\d+) +\S+ +\d+ +\S+ \S+ +\S+ \S+ +\d+ ", table, re.M)
top_ranks = [int(r) for r in rows]
members = {m["rank"]: m for m in report["run"]["members"] if m["rank"] is not None and m["rank"] >= 0}
busiest_first = sorted(members, key=lambda r: -members[r]["peak_bytes"])
exact = re.search(r"^peak .*\((\d+) bytes\)", table, re.M)
print("top ranks", top_ranks, "report's busiest first", busiest_first,
      "busiest peak", exact and exact.group(1), [members[r]["peak_bytes"] for r in busiest_first])
ok = (top_ranks == busiest_first and sorted(top_ranks) == [0, 1] and exact is not None
      and int(exact.group(1)) == members[busiest_first[0]]["peak_bytes"])
sys.exit(0 if ok else 1)
PY
  compared=$?
  expect '[ $compared -eq 0 ]' "the ranks in top's table: $(cat "$TMP/ranks/compare.txt")"
else
  echo "test_top.sh: torchrun checks skipped: no torchrun, or torch has no gloo backend"
fi

# 6. Growth across optimizer steps as the run goes: a planted leak of one
#    block a step is named with its range and bytes per step; a step without
#    one flags nothing.
(cd "$TMP" && "$PEAKSCOPE" top --lines --host -o leak.pstrace --interval 0.2 -- /usr/bin/python3 \
  "$REPO/workloads/torch/lora_step.py" --steps 4 --layers 4 --tokens 32 --leak-bytes 65536 >leak.txt 2>&1)
expect 'grep -qE "64\.00 KiB/step .* train/leaky_cache$" "$TMP/leak.txt"' \
  "the planted leak was not found with its range: $(grep -i growth "$TMP/leak.txt" | head -n 3)"
(cd "$TMP" && "$PEAKSCOPE" top --lines --host -o steady.pstrace --interval 0.2 -- /usr/bin/python3 \
  "$REPO/workloads/torch/lora_step.py" --steps 4 --layers 4 --tokens 32 >steady.txt 2>&1)
expect 'grep -q "growth across optimizer steps: nothing grows over 3 steps" "$TMP/steady.txt" && ! grep -q GROWING "$TMP/steady.txt"' \
  "steady steps were flagged, or not compared: $(grep -i growth "$TMP/steady.txt" | head -n 3)"

# 7. Bad input: exit 2 with one line saying why.
"$PEAKSCOPE" top >"$TMP/bad.txt" 2>&1
status=$?
expect '[ $status -eq 2 ] && grep -q "no trace to follow" "$TMP/bad.txt"' "top without a trace or command"
"$PEAKSCOPE" top "$TMP/followed.pstrace" --budget 1GiB >"$TMP/bad.txt" 2>&1
status=$?
expect '[ $status -eq 2 ] && grep -q "needs --calibration" "$TMP/bad.txt"' "--budget without --calibration"
head -c 300 /dev/urandom >"$TMP/noise.pstrace"
"$PEAKSCOPE" top "$TMP/noise.pstrace" --lines >"$TMP/bad.txt" 2>&1
status=$?
expect '[ $status -eq 2 ] && grep -q "not a peakscope trace" "$TMP/bad.txt"' "a file that is not a trace: $(cat "$TMP/bad.txt")"

# A command that cannot run: top says why (from record's log) and exits as
# record did (127: not found).
timeout 60 "$PEAKSCOPE" top --lines -o "$TMP/never.pstrace" -- "$TMP/no_such_program" </dev/null >"$TMP/never.out" 2>"$TMP/never.err"
status=$?
expect '[ $status -eq 127 ] && grep -q "^peakscope top: cannot run .*no_such_program.*: No such file or directory" "$TMP/never.err"' \
  "top of a command that cannot run exited $status without saying why: $(tail -n 2 "$TMP/never.err")"

finish
