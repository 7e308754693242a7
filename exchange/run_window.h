// A window of a run (`export DIR --from T0 --to T1`, `--wave N`): one stretch
// of the run's shared clock, cut out of every member.
//
// A member's own times count from its own first event, which the members do
// not share, so the window is expressed on the run's clock (traces/run.h
// RunClock: a member's CLOCK_MONOTONIC t lands at t - monotonic_ns +
// realtime_ns of its header), counted from the run's earliest event there.
// Each member gets that stretch converted back to its own clock (an absolute
// ExportWindow) and is written by write_window, so the state carried in at
// the window's start is each member's own.
//
// --wave N is the union of every member's own wave N on the run's clock (the
// earliest push, the latest pop), so every rank shows the same stretch. A
// member without wave N, or with no event in the window, has nothing written
// and a note saying why; the others are written. Only a window that no
// member has anything in is an error.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "exchange/export_window.h"
#include "traces/run.h"

namespace psc {

struct RunWindowMember {
  std::string window_path;  // the member's window trace; "" when it has nothing in the window
  WindowResult result;
  std::string note;  // why it has nothing in the window ("" when it has something)
};

struct RunWindow {
  // The run's earliest event on the run's clock: ns after its origin
  // (RunClock::origin_realtime_ns).
  int64_t zero_ns = 0;
  uint64_t begin_ns = 0;                 // the window, ns after the run's earliest event ...
  std::optional<uint64_t> end_ns;        // ... absent: to the run's end
  std::vector<RunWindowMember> members;  // in the run's order
};

// "run 'job-7'", or "the run" when nothing names it: what messages call it.
std::string run_name(const Run& run);

// Writes the window of every member of `run` that has something in it to
// `stem` + ".window<i>.pstrace" (i: the member's index), naming each file in
// `written` before writing it so a caller can remove them whatever happens.
// `window` is relative (from_ns/to_ns after the run's earliest event, or a
// wave), with or without summary. Throws InputError, naming the run, for a
// window no member has anything in (no member has wave N: how many waves each
// has), and as write_window does for a member that is not a trace.
RunWindow write_run_window(const Run& run, const ExportWindow& window, const std::string& stem,
                           std::vector<std::string>& written);

// The run to export: the members with something in the window, each read
// from its window trace (which keeps the member's header, so its process and
// its place on the run's clock stay its own); hosts of those members only.
Run windowed_run(const Run& run, const RunWindow& w);

}  // namespace psc
