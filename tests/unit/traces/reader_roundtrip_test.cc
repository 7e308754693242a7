// Writer -> reader round trips: every field of every kind survives the
// encoding (deltas, varints, per-chunk state resets), in order, across many
// chunks and threads; strings, threads, drops, late counts, the command line
// and the clean-end mark come back too.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "tests/support/test_support.h"
#include "traces/reader.h"
#include "traces/writer.h"

namespace psc {
namespace {

using test_support::TempTrace;

struct Rng {
  uint64_t state;
  uint64_t next() {
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    return state;
  }
  uint64_t below(uint64_t n) { return next() % n; }
};

// An event as the reader will give it back: fields a kind does not carry on
// disk are zero.
Event random_event(Rng& rng, uint64_t seq, uint64_t time_ns, const std::vector<StringId>& strings) {
  Event e{};
  e.seq = seq;
  e.time_ns = time_ns;
  e.kind = static_cast<EventKind>(1 + rng.below(kMaxEventKind));
  e.thread = static_cast<uint32_t>(rng.below(6) == 0 ? rng.below(1000) : rng.below(4));
  e.device = static_cast<int16_t>(static_cast<int64_t>(rng.below(10)) - 1);
  e.stream = rng.below(3) == 0 ? rng.next() : rng.below(4);
  e.memory = static_cast<MemoryKind>(rng.below(8));
  e.api = rng.below(2) ? Api::kCudaMalloc : Api::kPosixMemalign;
  e.flags = static_cast<uint8_t>(rng.below(8));
  e.range = strings[rng.below(strings.size())];
  const uint8_t fields = format::fields_of(e.kind);
  if (fields & format::kHasAddress)
    e.address = rng.below(4) == 0 ? rng.next() : 0x7f0000000000 + rng.below(1u << 20) * 64;
  if (fields & format::kHasBytes) e.bytes = rng.below(5) == 0 ? rng.next() : rng.below(1u << 24);
  if (fields & format::kHasName) e.name = strings[rng.below(strings.size())];
  if (fields & format::kHasPayload) e.payload = strings[rng.below(strings.size())];
  return e;
}

void expect_same(const Event& a, const Event& b, size_t i) {
  EXPECT_EQ(a.seq, b.seq) << "event " << i;
  EXPECT_EQ(a.time_ns, b.time_ns) << "event " << i;
  EXPECT_EQ(a.kind, b.kind) << "event " << i;
  EXPECT_EQ(a.thread, b.thread) << "event " << i;
  EXPECT_EQ(a.address, b.address) << "event " << i;
  EXPECT_EQ(a.bytes, b.bytes) << "event " << i;
  EXPECT_EQ(a.stream, b.stream) << "event " << i;
  EXPECT_EQ(a.device, b.device) << "event " << i;
  EXPECT_EQ(a.memory, b.memory) << "event " << i;
  EXPECT_EQ(a.api, b.api) << "event " << i;
  EXPECT_EQ(a.flags, b.flags) << "event " << i;
  EXPECT_EQ(a.range.value, b.range.value) << "event " << i;
  EXPECT_EQ(a.name.value, b.name.value) << "event " << i;
  EXPECT_EQ(a.payload.value, b.payload.value) << "event " << i;
}

TEST(ReaderRoundTrip, EveryFieldOfEveryKindAcrossManyChunks) {
  TempTrace file("fields");
  TraceWriterOptions options;
  options.pid = 4321;
  options.rank = 3;
  options.local_rank = 1;
  options.flags = format::kHeaderHostMode;
  options.command = "python train.py --steps 3";
  options.chunk_bytes = 4096;  // many chunks: delta state resets at each one
  std::vector<Event> written;
  std::vector<std::string> texts = {"forward/layer.0", "backward/layer.11", "wave", R"({"tokens":7})", "ünïcode ✓"};
  {
    TraceWriter w(file.path, options);
    std::vector<StringId> ids{StringId{}};
    for (const std::string& s : texts) ids.push_back(w.intern(s));
    for (uint32_t t = 0; t < 4; ++t) w.thread(t, 100 + t, "worker-" + std::to_string(t));
    Rng rng{0x9e3779b97f4a7c15ull};
    uint64_t seq = 0, time = 5'000'000'000ull;
    for (int i = 0; i < 20000; ++i) {
      seq += rng.below(20) == 0 ? 2 + rng.below(1000) : 1;                            // jumps: drops on other threads
      time = rng.below(50) == 0 ? time - rng.below(1000) : time + rng.below(100000);  // clocks may step back
      Event e = random_event(rng, seq, time, ids);
      w.event(e);
      written.push_back(e);
    }
    std::array<uint64_t, format::kDropReasonCount> drops{};
    drops[0] = 11;
    drops[5] = 2;
    w.drops(drops);
    w.close();
  }
  const LoadedTrace loaded = load_trace(file.path);
  EXPECT_TRUE(loaded.status.complete()) << loaded.status.reason;
  EXPECT_GT(loaded.status.chunks, 10u);
  EXPECT_EQ(loaded.status.good_bytes, loaded.status.file_bytes);
  ASSERT_EQ(loaded.events.size(), written.size());
  EXPECT_EQ(loaded.status.events, written.size());
  for (size_t i = 0; i < written.size(); ++i) expect_same(loaded.events[i], written[i], i);

  const TraceMeta& meta = loaded.meta;
  EXPECT_TRUE(meta.clean_end);
  EXPECT_EQ(meta.command, options.command);
  EXPECT_EQ(meta.header.pid, 4321u);
  EXPECT_EQ(meta.header.rank, 3);
  EXPECT_EQ(meta.header.local_rank, 1);
  EXPECT_EQ(meta.header.flags, static_cast<uint32_t>(format::kHeaderHostMode));
  EXPECT_EQ(meta.drops[0], 11u);
  EXPECT_EQ(meta.drops[5], 2u);
  EXPECT_EQ(meta.dropped_total(), 13u);
  ASSERT_GE(meta.threads.size(), 4u);
  EXPECT_EQ(meta.threads[2].name, "worker-2");
  EXPECT_EQ(meta.threads[2].os_tid, 102u);
  for (size_t i = 0; i < texts.size(); ++i) EXPECT_EQ(meta.string(StringId{static_cast<uint32_t>(i + 1)}), texts[i]);
  EXPECT_EQ(meta.string(StringId{}), "");
  EXPECT_EQ(meta.string(StringId{999999}), "");
}

// `events` events numbered from 1 on one thread, in chunks of 4 KiB:
// allocations, and every `mark_every`-th (0: none) a mark named "mark.<seq>",
// a new string in nearly every chunk.
void write_numbered(const std::string& path, uint64_t events, uint64_t mark_every) {
  TraceWriterOptions options;
  options.chunk_bytes = 4096;
  TraceWriter w(path, options);
  w.thread(0, 100, "main");
  for (uint64_t i = 1; i <= events; ++i) {
    Event e{};
    e.seq = i;
    e.time_ns = 1000 * i;
    e.kind = mark_every && i % mark_every == 0 ? EventKind::kMark : EventKind::kAlloc;
    if (e.kind == EventKind::kMark) {
      e.name = w.intern("mark." + std::to_string(i));
    } else {
      e.address = 0x1000 * i;
      e.bytes = 64;
    }
    w.event(e);
  }
  w.close();
}

// A visitor that has what it needs stops the read: no chunk after the batch
// where it said so is read, and the status says the read stopped.
TEST(ReaderRoundTrip, AFinishedVisitorStopsTheRead) {
  TempTrace file("stop");
  write_numbered(file.path, 20000, 0);
  struct StopAfter : TraceVisitor {
    uint64_t limit = 0, seen = 0, batches = 0;
    bool ended = false;
    void on_events(const Event*, size_t n, const TraceMeta&) override {
      seen += n;
      ++batches;
    }
    void on_end(const TraceMeta&, const ReadStatus&) override { ended = true; }
    bool finished() const override { return seen >= limit; }
  };
  StopAfter all;
  all.limit = UINT64_MAX;
  const ReadStatus whole = read_trace(file.path, all);
  ASSERT_GT(whole.chunks, 10u);
  EXPECT_FALSE(whole.stopped);
  EXPECT_EQ(all.seen, 20000u);

  // Chunks decoding ahead on other threads are not handed over after it either.
  for (int threads : {0, 1, 3}) {
    SCOPED_TRACE(std::to_string(threads) + " decoding threads");
    ReadOptions options;
    options.decode_threads = threads;
    StopAfter some;
    some.limit = 5000;
    const ReadStatus part = read_trace(file.path, some, options);
    EXPECT_TRUE(part.stopped);
    EXPECT_TRUE(some.ended);
    EXPECT_GE(some.seen, 5000u);
    EXPECT_LT(some.seen, 20000u);
    EXPECT_EQ(part.events, some.seen);
    EXPECT_EQ(part.chunks, some.batches);  // not one chunk more than the one that finished it
    EXPECT_LT(part.good_bytes, whole.good_bytes);
  }
}

// Many chunks decoding on several threads reach the visitor in file order,
// each with the strings it names; a visitor that throws ends the read, the
// exception reaches the caller, and the threads stop.
TEST(ReaderRoundTrip, ChunksDecodedOnOtherThreadsArriveInOrder) {
  TempTrace file("threads");
  write_numbered(file.path, 50000, 100);
  struct Check : TraceVisitor {
    uint64_t next_seq = 1, batches = 0;
    bool in_order = true, named = true;
    uint64_t throw_after = UINT64_MAX;
    void on_events(const Event* e, size_t n, const TraceMeta& meta) override {
      for (size_t i = 0; i < n; ++i) {
        in_order = in_order && e[i].seq == next_seq++;
        if (e[i].kind == EventKind::kMark)
          named = named && meta.string(e[i].name) == "mark." + std::to_string(e[i].seq);
      }
      if (++batches == throw_after) throw std::runtime_error("the visitor gave up");
    }
  };
  for (int threads : {1, 2, 4}) {
    SCOPED_TRACE(std::to_string(threads) + " decoding threads");
    ReadOptions read_options;
    read_options.decode_threads = threads;
    Check all;
    const ReadStatus status = read_trace(file.path, all, read_options);
    EXPECT_TRUE(status.complete()) << status.reason;
    EXPECT_GT(status.chunks, 20u);
    EXPECT_EQ(all.next_seq, 50001u);
    EXPECT_TRUE(all.in_order);
    EXPECT_TRUE(all.named);
    Check giving_up;
    giving_up.throw_after = 3;
    EXPECT_THROW(read_trace(file.path, giving_up, read_options), std::runtime_error);
    EXPECT_EQ(giving_up.batches, 3u);
  }
}

TEST(ReaderRoundTrip, StringLargerThanAChunk) {
  TempTrace file("bigstring");
  TraceWriterOptions options;
  options.chunk_bytes = 4096;
  const std::string big(100000, 'x');
  {
    TraceWriter w(file.path, options);
    w.thread(0, 1, "main");
    Event e{};
    e.seq = 1;
    e.kind = EventKind::kMark;
    e.name = w.intern("wave");
    e.payload = w.intern(big);
    w.event(e);
    w.close();
  }
  const LoadedTrace loaded = load_trace(file.path);
  ASSERT_EQ(loaded.events.size(), 1u);
  EXPECT_EQ(loaded.meta.string(loaded.events[0].payload), big);
}

TEST(ReaderRoundTrip, VisitorSeesBatchesInSequenceOrderAndStringsFirst) {
  TempTrace file("order");
  TraceWriterOptions options;
  options.chunk_bytes = 4096;
  constexpr int kEvents = 50000;
  {
    TraceWriter w(file.path, options);
    for (uint32_t t = 0; t < 16; ++t) w.thread(t, t + 1, "t");
    for (int i = 0; i < kEvents; ++i) {
      Event e{};
      e.seq = static_cast<uint64_t>(i) + 1;
      e.time_ns = static_cast<uint64_t>(i) * 10;
      e.thread = static_cast<uint32_t>(i % 16);
      e.kind = i % 2 ? EventKind::kFree : EventKind::kAlloc;
      e.address = 0x1000 + static_cast<uint64_t>(i / 2) * 64;
      e.bytes = 64;
      // A new string every 1000 events: it must be readable by the batch that uses it.
      if (i % 1000 == 0) e.range = w.intern("range-" + std::to_string(i));
      w.event(e);
    }
    w.close();
  }
  struct Checker : TraceVisitor {
    uint64_t last_seq = 0, count = 0, batches = 0;
    bool began = false, ended = false;
    void on_begin(const TraceMeta&) override { began = true; }
    void on_events(const Event* e, size_t n, const TraceMeta& meta) override {
      ++batches;
      for (size_t i = 0; i < n; ++i) {
        EXPECT_GT(e[i].seq, last_seq);
        last_seq = e[i].seq;
        if (!e[i].range.empty()) {
          EXPECT_EQ(meta.string(e[i].range).substr(0, 6), "range-");
        }
        ++count;
      }
    }
    void on_end(const TraceMeta&, const ReadStatus& s) override {
      ended = true;
      EXPECT_TRUE(s.complete());
    }
  } checker;
  const ReadStatus status = read_trace(file.path, checker);
  EXPECT_TRUE(checker.began);
  EXPECT_TRUE(checker.ended);
  EXPECT_EQ(checker.count, static_cast<uint64_t>(kEvents));
  EXPECT_EQ(status.events, static_cast<uint64_t>(kEvents));
  EXPECT_GT(checker.batches, 1u);
}

TEST(ReaderRoundTrip, NamesForEnums) {
  EXPECT_STREQ(event_kind_name(EventKind::kAlloc), "alloc");
  EXPECT_STREQ(memory_kind_name(MemoryKind::kVmmPhysical), "vmm_physical");
  EXPECT_STREQ(api_name(Api::kCuMemAlloc), "cuMemAlloc");
  EXPECT_STREQ(drop_reason_name(format::DropReason::kBufferFull), "buffer_full");
  EXPECT_STREQ(event_kind_name(static_cast<EventKind>(200)), "unknown");
}

}  // namespace
}  // namespace psc

namespace psc {
namespace {

// A chunk's events reach the visitor once the whole chunk has decoded: an
// event that names a string whose record comes later in the same chunk finds
// the string in meta when it arrives.
TEST(ReaderRoundTrip, AStringDefinedLaterInItsChunkIsThereWhenTheEventArrives) {
  TempTrace file("late_string");
  constexpr int kEvents = 20000;  // several batches, one 1 MiB chunk
  {
    TraceWriter w(file.path, TraceWriterOptions{});
    w.thread(0, 1, "t");
    const StringId early = w.intern("early");
    for (int i = 0; i < kEvents; ++i) {
      Event e{};
      e.seq = static_cast<uint64_t>(i) + 1;
      e.time_ns = static_cast<uint64_t>(i) * 10;
      e.kind = EventKind::kMark;
      e.name = i == kEvents / 2 ? StringId{early.value + 1} : early;  // the next id, interned below
      w.event(e);
    }
    ASSERT_EQ(w.intern("late").value, early.value + 1);
    w.close();
  }
  struct Checker : TraceVisitor {
    uint64_t count = 0;
    void on_events(const Event* e, size_t n, const TraceMeta& meta) override {
      for (size_t i = 0; i < n; ++i, ++count)
        EXPECT_EQ(meta.string(e[i].name), count == kEvents / 2 ? "late" : "early") << "event " << count;
    }
  } checker;
  const ReadStatus status = read_trace(file.path, checker);
  EXPECT_EQ(status.chunks, 1u);
  EXPECT_EQ(checker.count, static_cast<uint64_t>(kEvents));
}

}  // namespace
}  // namespace psc
