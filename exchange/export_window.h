// Long traces for viewers: a window of a trace (`export --from T0 --to T1`,
// `--wave N`) and a summary (`--summary`: counters and ranges, no allocation
// events), written as a smaller trace that any exporter then reads as it
// reads every trace (docs/viewers.md "Long traces").
//
// The window keeps the state at its start right: every block live at T0, every
// range open there and every counter's last value come first, at the window's
// start time (in their original order, with their own sequence numbers and
// ranges), so counters, lanes and slices in a viewer begin at the right values.
// A summary replaces allocations and frees by counter events of live bytes per
// memory level and device, at most two (the bucket's maximum, then its last
// value) in each of kSummaryBuckets buckets of the window: its size depends on
// the number of ranges, never on the number of allocations.
//
// One read of the input, memory O(live allocations + open ranges).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace psc {

// A time given on the command line: "1.5s", "200ms", "30us", "1000ns" or a
// bare number of nanoseconds. Throws std::invalid_argument naming the text.
uint64_t parse_duration_ns(std::string_view text);

struct ExportWindow {
  // Relative to the trace's first event, or with `absolute` times of the
  // trace's own clock (CLOCK_MONOTONIC ns, as its events carry them: how a
  // run's window reaches each member, exchange/run_window.h). Either may be
  // absent (the trace's start, the trace's end).
  std::optional<uint64_t> from_ns;
  std::optional<uint64_t> to_ns;
  std::optional<int32_t> wave;  // the wave's own span instead of from/to
  bool summary = false;
  bool absolute = false;

  bool active() const { return from_ns || to_ns || wave || summary; }
};

constexpr size_t kSummaryBuckets = 10000;

struct WindowResult {
  uint64_t first_time_ns = 0;  // the input trace's first event
  uint64_t begin_ns = 0;       // the window, absolute
  uint64_t end_ns = 0;
  uint64_t input_events = 0;    // read up to the window's end
  uint64_t carried_events = 0;  // state at the window's start (blocks, ranges, counters)
  uint64_t output_events = 0;   // written in all
  // Only for an absolute window: the trace has nothing in it (it ends before
  // the window begins, or begins after it ends, or has no events); nothing
  // was written.
  bool empty = false;
};

// Writes the window (and summary) of `trace` to `output` as a .pstrace.
// Throws InputError (exchange/exporter.h), naming the trace, for a window that
// is invalid, or empty when it is relative: T1 before T0, a wave the trace
// does not have, a start beyond the trace's end; TraceError when the input is
// not a trace. The read stops at the window's end: the rest of the file is
// read only for what the window's end needs (the placement of deferred
// events, threads, drops and whether the trace ended cleanly), not replayed.
WindowResult write_window(const std::string& trace, const ExportWindow& window, const std::string& output);

// What a run's window needs of a member before any window is written: its
// first event and, for a wave, the wave's span, on the trace's own clock.
struct WindowProbe {
  bool any_events = false;
  uint64_t first_time_ns = 0;  // the first event the hooks recorded (CUPTI's deferred ones aside)
  bool has_wave = false;
  uint64_t wave_begin_ns = 0;  // the wave's push ...
  uint64_t wave_end_ns = 0;    // ... and pop (the trace's last event when it stops inside the wave)
  int32_t waves_seen = 0;      // every wave of the trace when it has not the one asked for
};
// Throws TraceError when the input is not a trace. Without a wave it reads
// only the trace's first chunk; with one, up to the wave's end.
WindowProbe probe_window(const std::string& trace, std::optional<int32_t> wave);

// "1.500000 s" for messages.
std::string format_seconds(uint64_t ns);

}  // namespace psc
