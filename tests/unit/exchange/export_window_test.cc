// Windows and summaries of a trace (exchange/export_window.h): the state at
// the window's start is carried in (the window's analysis finds the same
// baseline and peak as the whole trace's), a summary has no allocation
// events and its counters end at the live bytes, and invalid windows are
// refused with a reason.
#include "exchange/export_window.h"

#include <gtest/gtest.h>

#include <array>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <vector>

#include "analysis/analysis.h"
#include "exchange/exporter.h"
#include "tests/support/synthetic_trace.h"
#include "tests/support/test_support.h"
#include "traces/reader.h"

namespace psc {
namespace {

using test_support::Scratch;

// Persistent 1000 B, then two waves of forward/backward allocations; time
// advances 1 us per event from the first.
void write_two_waves(const std::string& path) {
  SyntheticTrace t(path);
  t.name_thread(0, "main");
  t.alloc(0, 0x1000, 1000);
  for (int wave = 0; wave < 2; ++wave) {
    t.wave_begin(0, wave == 0 ? R"({"tokens":1024,"cold":true})" : R"({"tokens":1024,"cold":false})");
    t.push(0, "forward/layer.0");
    t.alloc(0, 0x2000, 300 + 100 * wave);
    t.alloc(0, 0x3000, 500);
    t.pop(0);
    t.push(0, "backward/layer.0");
    t.free(0, 0x3000);
    t.free(0, 0x2000);
    t.pop(0);
    t.wave_end(0);
  }
  t.close();
}

TEST(ExportWindow, DurationsTakeUnits) {
  EXPECT_EQ(parse_duration_ns("1.5s"), 1'500'000'000u);
  EXPECT_EQ(parse_duration_ns("200ms"), 200'000'000u);
  EXPECT_EQ(parse_duration_ns("30us"), 30'000u);
  EXPECT_EQ(parse_duration_ns("100ns"), 100u);
  EXPECT_EQ(parse_duration_ns("42"), 42u);
  EXPECT_THROW(parse_duration_ns("1.5x"), std::invalid_argument);
  EXPECT_THROW(parse_duration_ns("-1s"), std::invalid_argument);
  EXPECT_THROW(parse_duration_ns("s"), std::invalid_argument);
  EXPECT_THROW(parse_duration_ns(""), std::invalid_argument);
}

TEST(ExportWindow, AWaveWindowCarriesTheBlocksLiveAtItsStart) {
  Scratch dir;
  const std::string trace = dir.path("t.pstrace"), window = dir.path("w.pstrace");
  write_two_waves(trace);
  const Analysis whole = analyze_trace(trace);
  ASSERT_EQ(whole.waves.size(), 2u);

  ExportWindow w;
  w.wave = 1;
  const WindowResult r = write_window(trace, w, window);
  EXPECT_EQ(r.carried_events, 1u) << "the persistent block";
  const Analysis part = analyze_trace(window);
  ASSERT_EQ(part.waves.size(), 1u);
  EXPECT_EQ(part.waves[0].baseline_bytes, whole.waves[1].baseline_bytes);
  EXPECT_EQ(part.waves[0].peak.bytes, whole.waves[1].peak.bytes);
  EXPECT_EQ(part.waves[0].span.payload.raw, whole.waves[1].span.payload.raw);
  EXPECT_EQ(part.peak.bytes, 1000u + 400 + 500);
  EXPECT_EQ(part.trace.header.pid, whole.trace.header.pid);
  EXPECT_EQ(std::string(part.trace.header.hostname), std::string(whole.trace.header.hostname));
}

TEST(ExportWindow, ATimeWindowOpensTheRangesOpenAtItsStart) {
  Scratch dir;
  const std::string trace = dir.path("t.pstrace"), window = dir.path("w.pstrace");
  write_two_waves(trace);
  // Events 0..: alloc, push wave, mark, push forward, alloc 0x2000, alloc 0x3000 (5 us), pop ...
  ExportWindow w;
  w.from_ns = 5'000;  // at the second allocation of wave 0, inside forward/layer.0
  w.to_ns = 7'000;
  write_window(trace, w, window);
  const LoadedTrace loaded = load_trace(window);
  ASSERT_GE(loaded.events.size(), 5u);
  // Carried first, at the window's start: alloc 0x1000, the wave push and mark,
  // the forward push, alloc 0x2000; then the window's own events.
  EXPECT_EQ(loaded.events[0].kind, EventKind::kAlloc);
  EXPECT_EQ(loaded.events[1].kind, EventKind::kRangePush);
  EXPECT_EQ(loaded.events[2].kind, EventKind::kMark);
  EXPECT_EQ(loaded.events[3].kind, EventKind::kRangePush);
  EXPECT_EQ(loaded.meta.string(loaded.events[3].name), "forward/layer.0");
  EXPECT_EQ(loaded.events[4].kind, EventKind::kAlloc);
  for (size_t i = 0; i < 5; ++i) EXPECT_EQ(loaded.events[i].time_ns, loaded.events[0].time_ns);
  for (size_t i = 1; i < loaded.events.size(); ++i) EXPECT_LT(loaded.events[i - 1].seq, loaded.events[i].seq);
  const Analysis part = analyze_trace(window);
  EXPECT_EQ(part.peak.bytes, 1000u + 300 + 500);
  ASSERT_EQ(part.waves.size(), 1u);
  EXPECT_EQ(part.waves[0].span.payload.cold, std::optional<bool>(true));
}

TEST(ExportWindow, ASummaryHasCountersAndRangesOnly) {
  Scratch dir;
  const std::string trace = dir.path("t.pstrace"), window = dir.path("w.pstrace");
  write_two_waves(trace);
  ExportWindow w;
  w.summary = true;
  write_window(trace, w, window);
  const LoadedTrace loaded = load_trace(window);
  uint64_t ranges = 0, counters = 0, last = 0, max = 0;
  for (const Event& e : loaded.events) {
    EXPECT_FALSE(is_memory_event(e.kind));
    if (e.kind == EventKind::kRangePush || e.kind == EventKind::kRangePop) ++ranges;
    if (e.kind == EventKind::kCounter) {
      ++counters;
      EXPECT_EQ(loaded.meta.string(e.name), "live bytes (allocated, device 0)");
      last = e.bytes;
      max = std::max(max, e.bytes);
    }
  }
  EXPECT_EQ(ranges, 12u);
  EXPECT_GT(counters, 0u);
  EXPECT_EQ(max, 1000u + 400 + 500) << "every bucket keeps its maximum";
  EXPECT_EQ(last, 1000u);
}

// Many small chunks: 20 000 allocations and frees on thread 0, then a thread
// named only at the end, drops and a clean close, as a long recording ends.
uint64_t write_long(const std::string& path) {
  TraceWriterOptions options;
  options.chunk_bytes = 4096;
  SyntheticTrace t(path, options);
  t.name_thread(0, "main", 1000);
  for (int wave = 0; wave < 100; ++wave) {
    t.wave_begin(0, R"({"tokens":64})");
    for (int i = 0; i < 100; ++i) {
      t.alloc(0, 0x1000 + 0x100 * static_cast<uint64_t>(i), 64);
      t.free(0, 0x1000 + 0x100 * static_cast<uint64_t>(i));
    }
    t.wave_end(0);
  }
  t.name_thread(1, "late", 2000);
  t.mark(1, "done");
  std::array<uint64_t, format::kDropReasonCount> drops{};
  drops[0] = 7;
  t.drops(drops);
  const uint64_t events = t.events();
  t.close();
  return events;
}

TEST(ExportWindow, AWindowNearTheStartStopsReadingAndClosesAsTheTraceDid) {
  Scratch dir;
  const std::string trace = dir.path("long.pstrace"), window = dir.path("w.pstrace");
  const uint64_t total = write_long(trace);
  ASSERT_GT(total, 20'000u);
  const LoadedTrace whole = load_trace(trace);
  ASSERT_GT(whole.status.chunks, 20u);

  ExportWindow w;
  w.from_ns = 0;
  w.to_ns = 50'000;  // the first 51 events
  const WindowResult r = write_window(trace, w, window);
  EXPECT_LT(r.input_events, total / 20) << "read up to the window's end, not the whole trace";
  const LoadedTrace part = load_trace(window);
  // The whole trace's events up to the window's end, as they were.
  std::vector<Event> expected;
  for (const Event& e : whole.events)
    if (e.time_ns <= whole.events.front().time_ns + 50'000) expected.push_back(e);
  ASSERT_EQ(part.events.size(), expected.size());
  EXPECT_EQ(r.output_events, expected.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    EXPECT_EQ(part.events[i].seq, expected[i].seq) << i;
    EXPECT_EQ(part.events[i].time_ns, expected[i].time_ns) << i;
    EXPECT_EQ(part.events[i].kind, expected[i].kind) << i;
    EXPECT_EQ(part.meta.string(part.events[i].name), whole.meta.string(expected[i].name)) << i;
  }
  // What the file's end says still closes the window: every thread named,
  // the drops, the clean end.
  ASSERT_EQ(part.meta.threads.size(), 2u);
  EXPECT_EQ(part.meta.threads[1].name, "late");
  EXPECT_EQ(part.meta.threads[1].os_tid, 2000u);
  EXPECT_EQ(part.meta.drops, whole.meta.drops);
  EXPECT_EQ(part.meta.drops[0], 7u);
  EXPECT_TRUE(part.meta.clean_end);

  // A wave stops the read at its pop; a wave the trace lacks reads it all,
  // so the message counts every wave.
  ExportWindow wave;
  wave.wave = 1;
  const WindowResult in_wave = write_window(trace, wave, window);
  EXPECT_LT(in_wave.input_events, total / 20);
  EXPECT_TRUE(load_trace(window).meta.clean_end);
  wave.wave = 100;
  try {
    write_window(trace, wave, window);
    ADD_FAILURE() << "wave 100 was found";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("(the trace has 100 waves"), std::string::npos) << e.what();
  }
  // A summary that runs to the trace's end reads it all.
  ExportWindow summary;
  summary.summary = true;
  summary.from_ns = 100'000;
  EXPECT_EQ(write_window(trace, summary, window).input_events, total);
}

TEST(ExportWindow, AnAbsoluteWindowIsOfTheTracesClockAndMayBeEmpty) {
  Scratch dir;
  const std::string trace = dir.path("t.pstrace"), window = dir.path("w.pstrace");
  write_two_waves(trace);
  const LoadedTrace whole = load_trace(trace);
  const uint64_t first = whole.events.front().time_ns;
  ExportWindow relative;
  relative.from_ns = 5'000;
  relative.to_ns = 7'000;
  const WindowResult r = write_window(trace, relative, window);
  ExportWindow absolute = relative;
  absolute.absolute = true;
  absolute.from_ns = first + 5'000;
  absolute.to_ns = first + 7'000;
  const WindowResult a = write_window(trace, absolute, window);
  EXPECT_FALSE(a.empty);
  EXPECT_EQ(a.begin_ns, r.begin_ns);
  EXPECT_EQ(a.end_ns, r.end_ns);
  EXPECT_EQ(a.output_events, r.output_events);
  EXPECT_EQ(a.carried_events, r.carried_events);

  std::filesystem::remove(window);
  absolute.from_ns = first - 9'000;  // before the trace begins ...
  absolute.to_ns = first - 1;
  EXPECT_TRUE(write_window(trace, absolute, window).empty);
  absolute.from_ns = first + 5'000'000;  // ... after it ends
  absolute.to_ns.reset();
  EXPECT_TRUE(write_window(trace, absolute, window).empty);
  EXPECT_FALSE(std::filesystem::exists(window)) << "nothing written for an empty window";
}

TEST(ExportWindow, InvalidWindowsSayWhy) {
  Scratch dir;
  const std::string trace = dir.path("t.pstrace"), window = dir.path("w.pstrace");
  write_two_waves(trace);
  ExportWindow backwards;
  backwards.from_ns = 2000;
  backwards.to_ns = 1000;
  ExportWindow no_wave;
  no_wave.wave = 7;
  ExportWindow beyond;
  beyond.from_ns = 5'000'000'000;
  auto reason = [&](const ExportWindow& w) {
    try {
      write_window(trace, w, window);
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(reason(backwards).find("before it begins"), std::string::npos) << reason(backwards);
  EXPECT_NE(reason(no_wave).find("there is no wave 7 (the trace has 2 waves"), std::string::npos) << reason(no_wave);
  EXPECT_NE(reason(beyond).find("beyond the trace's end"), std::string::npos) << reason(beyond);
}

}  // namespace
}  // namespace psc
