#!/usr/bin/env bash
# One command table (cli/command_table.cc) prints `peakscope help`, every
# `peakscope CMD -h` and README.md's "Command line" section: the three agree.
# Per command, the forms in `peakscope help` are those `CMD -h` prints (wrapping
# aside) with the same one-line description; every option the forms name has
# a line of help under "options:" and every option listed there appears in a
# form; README.md holds `peakscope help` and each `CMD -h` verbatim, and is
# what `make docs` writes (tools/docs).
#
#   tests/cli/test_help.sh            uses ${PSC_BUILD_DIR:-build}/peakscope
#   PEAKSCOPE=path/to/peakscope tests/cli/test_help.sh
# The checks of the command table are printed by the Python below, as
# "ok help: NAME" / "not ok help: NAME" lines of its own.
SUBJECT=help
. "$(dirname "$0")/lib.sh"
CAL=tests/cli/price/fixture.calibration.json

"$PEAKSCOPE" help >"$TMP/help" 2>"$TMP/help.err"
rc=$?
if [ $rc -ne 0 ] || [ -s "$TMP/help.err" ]; then
  check "peakscope help exits 0 with nothing on stderr (exit $rc)" 1 "$TMP/help.err"
  exit $PSC_STATUS
fi
"$PEAKSCOPE" -h >"$TMP/dash-h"
"$PEAKSCOPE" --help >"$TMP/dash-help"
ok=1
cmp -s "$TMP/help" "$TMP/dash-h" && cmp -s "$TMP/help" "$TMP/dash-help" && ok=0
check "peakscope help, -h and --help print the same" $ok

mkdir -p "$TMP/cmd"
for name in $(grep -oE '^  peakscope [a-z-]+' "$TMP/help" | awk '{print $2}' | uniq); do
  "$PEAKSCOPE" "$name" -h >"$TMP/cmd/$name" 2>"$TMP/cmd/$name.err" || echo "exit $?" >>"$TMP/cmd/$name.err"
done
"$PEAKSCOPE" price --calibration "$CAL" --tokens 100 -h >"$TMP/price-calibrated"
ok=1
cmp -s "$TMP/price-calibrated" "$TMP/cmd/price" && ok=0
check "peakscope price --calibration CAL -h prints price's one help" $ok

PEAKSCOPE="$PEAKSCOPE" tools/docs --print commands >"$TMP/generated" 2>"$TMP/docs.err"
docs=$?
[ $docs = 0 ] || check "tools/docs --print commands failed (exit $docs)" 1 "$TMP/docs.err"

python3 - "$TMP" <<'EOF'
import os, re, sys

tmp = sys.argv[1]
failed = False


def report(name, ok, detail=""):
    global failed
    print(("ok " if ok else "not ok ") + "help: " + name + ("" if ok or not detail else "\n    " + detail))
    failed = failed or not ok


def flat(lines):
    return " ".join(" ".join(lines).split())


def option_names(text):
    return set(re.findall(r"(?<![\w-])(--?[a-zA-Z][\w-]*)", text))


help_text = open(os.path.join(tmp, "help")).read()
# Per command in `peakscope help`: its forms (joined) and its description line.
blocks, current = {}, None
for line in help_text.splitlines():
    m = re.match(r"^  peakscope ([a-z-]+)", line)
    if m:
        if current is None or current[0] != m.group(1) or current[2] is not None:
            current = [m.group(1), [], None]
            blocks.setdefault(m.group(1), [])
            blocks[m.group(1)].append(current)
        current[1].append(["peakscope " + line[len("  peakscope "):]])
    elif current is not None and line.startswith("      ") and not line.startswith("       "):
        current[2] = line.strip()
    elif current is not None and line.startswith("   ") and current[1] and current[2] is None:
        current[1][-1].append(line)
names = list(blocks)
report(f"peakscope help lists {len(names)} commands, each once", len(names) >= 8 and all(len(b) == 1 for b in blocks.values()),
       f"{ {n: len(b) for n, b in blocks.items()} }")

readme = open("README.md").read()
begin = readme.find("<!-- begin generated: commands")
end = readme.find("<!-- end generated: commands -->")
section = readme[readme.index("\n", begin) + 1:end] if 0 <= begin < end else ""
report("README.md's command section is what tools/docs writes from the CLI (make docs)",
       section == open(os.path.join(tmp, "generated")).read())
report("README.md holds `peakscope help` verbatim", help_text.rstrip("\n") in section)

for name in names:
    path = os.path.join(tmp, "cmd", name)
    out, err = open(path).read(), open(path + ".err").read()
    lines = out.splitlines()
    ok = not err and lines and lines[0].startswith(f"usage: peakscope {name}")
    report(f"peakscope {name} -h exits 0 and begins 'usage: peakscope {name}'", ok, err.strip())
    if not ok:
        continue
    # The usage: the first line and every line that continues or adds a form.
    forms, i = [], 0
    while i < len(lines) and (i == 0 or lines[i].startswith(" ")):
        if lines[i].startswith("usage: peakscope ") or lines[i].startswith("       peakscope "):
            forms.append([lines[i].strip()[len("usage: "):] if i == 0 else lines[i].strip()])
        else:
            forms[-1].append(lines[i])
        i += 1
    about = lines[i] if i < len(lines) else ""
    _, help_forms, help_about = blocks[name][0]
    report(f"peakscope {name}: the forms in help and in -h agree",
           [flat(f) for f in forms] == [flat(f) for f in help_forms],
           f"help: {[flat(f) for f in help_forms]}\n    -h:   {[flat(f) for f in forms]}")
    report(f"peakscope {name}: the description in help and in -h agree", about == help_about,
           f"help: {help_about!r}, -h: {about!r}")
    # Each line under "options:" is one option, under all its names (-o, --output).
    entries = []
    if "options:" in lines:
        for line in lines[lines.index("options:") + 1:]:
            if not line.startswith("  "):
                break
            left = re.split(r"\s{2,}", line.strip())[0]
            entries.append({w.rstrip(",") for w in left.split() if w.startswith("-")})
    in_forms = set()
    for f in forms:
        in_forms |= option_names(flat(f))
    listed = set().union(*entries) if entries else set()
    unused = [sorted(e) for e in entries if not e & in_forms]
    report(f"peakscope {name}: every option in its forms has help, every option with help is in a form",
           in_forms <= listed and not unused,
           f"without help: {sorted(in_forms - listed)}, in no form: {unused}")
    report(f"README.md holds `peakscope {name} -h` verbatim", out.rstrip("\n") in section)

sys.exit(1 if failed else 0)
EOF
relay $?
exit $PSC_STATUS
