// Following a trace that is still being written (TraceFollower): a file that
// grows a few bytes at a time hands over exactly the events a read of the
// whole file gives, in order, never a chunk before it is whole; the end mark
// closes the follow; a writer that ended without one ends it too, with the
// unfinished tail said; damage is stepped over; memory holds one chunk.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "tests/support/synthetic_trace.h"
#include "tests/support/test_support.h"
#include "traces/follower.h"
#include "traces/reader.h"

namespace psc {
namespace {

using test_support::Scratch;

// Small chunks so that a few thousand events make many of them.
std::string write_trace(const std::string& path, bool clean_end, int waves = 400) {
  TraceWriterOptions options;
  options.chunk_bytes = 4096;  // the smallest the writer takes
  options.command = "follow-test";
  SyntheticTrace t(path, options);
  t.name_thread(0, "main");
  for (int w = 0; w < waves; ++w) {
    t.wave_begin(0, R"({"tokens":64,"groups":1})");
    t.push(0, "forward/layer.0");
    for (int i = 0; i < 8; ++i) t.alloc(0, 0x1000 + static_cast<uint64_t>(w * 16 + i) * 64, 4096);
    t.pop(0);
    t.push(0, "backward/layer.0");
    for (int i = 0; i < 8; ++i) t.free(0, 0x1000 + static_cast<uint64_t>(w * 16 + i) * 64);
    t.pop(0);
    t.wave_end(0);
  }
  t.close(clean_end);
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

struct Collect : TraceVisitor {
  int begins = 0;
  int ends = 0;
  std::vector<Event> events;
  ReadStatus end_status;
  bool clean_end = false;
  std::string command;
  void on_begin(const TraceMeta&) override { ++begins; }
  void on_events(const Event* e, size_t n, const TraceMeta&) override { events.insert(events.end(), e, e + n); }
  void on_end(const TraceMeta& meta, const ReadStatus& status) override {
    ++ends;
    end_status = status;
    clean_end = meta.clean_end;
    command = meta.command;
  }
};

void append(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::app);
  out << bytes;
}

bool same_events(const std::vector<Event>& a, const std::vector<Event>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i].seq != b[i].seq || a[i].kind != b[i].kind || a[i].address != b[i].address || a[i].bytes != b[i].bytes)
      return false;
  return true;
}

TEST(ReaderFollow, AGrowingFileGivesEveryEventOfTheWholeReadInOrder) {
  Scratch dir;
  const std::string whole = dir.path("whole.pstrace");
  const std::string bytes = write_trace(whole, true);
  const LoadedTrace expected = load_trace(whole);
  ASSERT_GT(expected.status.chunks, 5u) << "the test needs many chunks";

  const std::string growing = dir.path("growing.pstrace");
  TraceFollower follower(growing, static_cast<uint32_t>(getpid()));  // a live writer: this process
  Collect seen;
  // No file yet, then a file shorter than its header: waiting, nothing handed over.
  EXPECT_EQ(follower.poll(seen).state, FollowStatus::State::kWaiting);
  append(growing, bytes.substr(0, 10));
  EXPECT_EQ(follower.poll(seen).state, FollowStatus::State::kWaiting);
  EXPECT_EQ(seen.begins, 0);
  size_t written = 10;
  size_t polls = 0;
  uint64_t last_events = 0;
  while (written < bytes.size()) {
    const size_t piece = std::min<size_t>(997, bytes.size() - written);  // never a chunk's size
    append(growing, bytes.substr(written, piece));
    written += piece;
    const FollowStatus s = follower.poll(seen);
    ++polls;
    // Only whole chunks: what was handed over is a prefix of the whole read.
    ASSERT_LE(seen.events.size(), expected.events.size());
    ASSERT_TRUE(same_events(
        seen.events,
        std::vector<Event>(expected.events.begin(), expected.events.begin() + static_cast<long>(seen.events.size()))));
    EXPECT_GE(s.events, last_events);
    last_events = s.events;
    EXPECT_LE(s.bytes, written);
    if (written < bytes.size()) {
      EXPECT_EQ(s.state, FollowStatus::State::kFollowing) << "at " << written;
    }
  }
  EXPECT_GT(polls, expected.status.chunks);
  EXPECT_EQ(follower.status().state, FollowStatus::State::kClosed);
  EXPECT_TRUE(same_events(seen.events, expected.events));
  EXPECT_EQ(seen.begins, 1);
  EXPECT_EQ(seen.ends, 1);
  EXPECT_TRUE(seen.clean_end);
  EXPECT_EQ(seen.command, "follow-test");
  EXPECT_EQ(seen.end_status.state, ReadStatus::State::kComplete);
  EXPECT_EQ(seen.end_status.chunks, expected.status.chunks);
  // Over: later polls hand over nothing more.
  follower.poll(seen);
  EXPECT_EQ(seen.ends, 1);
}

// What can never become a trace is refused at once, not waited for: a short
// file that does not begin as a trace does, a path whose folder is missing.
TEST(ReaderFollow, WhatCanNeverBeATraceIsRefusedNotWaitedFor) {
  Scratch dir;
  const std::string text = dir.path("notes.txt");
  append(text, "hello\n");  // shorter than the magic
  Collect seen;
  TraceFollower short_text(text, static_cast<uint32_t>(getpid()));
  EXPECT_THROW(short_text.poll(seen), TraceError);
  TraceFollower nowhere(dir.path("missing/folder/t.pstrace"), static_cast<uint32_t>(getpid()));
  try {
    nowhere.poll(seen);
    ADD_FAILURE() << "a trace in a missing folder is waited for";
  } catch (const TraceError& e) {
    EXPECT_NE(std::string(e.what()).find("does not exist"), std::string::npos) << e.what();
  }
  // A prefix of a trace's magic, and no file in a folder that exists: waited for.
  const std::string begun = dir.path("begun.pstrace");
  append(begun, "PSTR");
  TraceFollower prefix(begun, static_cast<uint32_t>(getpid()));
  EXPECT_EQ(prefix.poll(seen).state, FollowStatus::State::kWaiting);
  TraceFollower later(dir.path("later.pstrace"), static_cast<uint32_t>(getpid()));
  EXPECT_EQ(later.poll(seen).state, FollowStatus::State::kWaiting);
  EXPECT_EQ(seen.begins, 0);
}

TEST(ReaderFollow, AWriterThatEndedWithoutTheEndMarkEndsTheFollowAndItsTornTailIsSaid) {
  Scratch dir;
  const std::string whole = dir.path("whole.pstrace");
  const std::string bytes = write_trace(whole, false);
  const LoadedTrace expected = load_trace(whole);
  const std::string torn = dir.path("torn.pstrace");
  append(torn, bytes + std::string(40, '\x01'));  // a chunk header the writer never finished
  TraceFollower follower(torn, static_cast<uint32_t>(getpid()));
  Collect seen;
  EXPECT_EQ(follower.poll(seen).state, FollowStatus::State::kFollowing);  // the writer may add more
  EXPECT_EQ(seen.events.size(), expected.events.size());
  follower.writer_ended();
  const FollowStatus s = follower.poll(seen);
  EXPECT_EQ(s.state, FollowStatus::State::kWriterGone);
  EXPECT_EQ(seen.ends, 1);
  EXPECT_FALSE(seen.clean_end);
  EXPECT_EQ(seen.end_status.state, ReadStatus::State::kTruncated);
  EXPECT_NE(seen.end_status.reason.find("at byte " + std::to_string(bytes.size())), std::string::npos)
      << seen.end_status.reason;
}

TEST(ReaderFollow, AWriterWhoseProcessIsGoneIsNoticedFromTheHeader) {
  Scratch dir;
  const std::string path = dir.path("gone.pstrace");
  write_trace(path, false);
  // The synthetic writer names this process in the header: a pid that no
  // longer exists stands for a writer that died.
  const pid_t child = fork();
  if (child == 0) _exit(0);
  int status = 0;
  waitpid(child, &status, 0);
  TraceFollower follower(path, static_cast<uint32_t>(child));
  Collect seen;
  EXPECT_EQ(follower.poll(seen).state, FollowStatus::State::kWriterGone);
  EXPECT_EQ(seen.ends, 1);
  EXPECT_EQ(seen.end_status.state, ReadStatus::State::kComplete);
}

TEST(ReaderFollow, DamageWithWholeChunksAfterItIsSteppedOver) {
  Scratch dir;
  const std::string whole = dir.path("whole.pstrace");
  std::string bytes = write_trace(whole, true);
  const LoadedTrace expected = load_trace(whole);
  // Break one byte in the middle of the file: one chunk is lost, as read_trace loses it.
  bytes[bytes.size() / 2] ^= 0x55;
  const std::string damaged = dir.path("damaged.pstrace");
  append(damaged, bytes);
  const LoadedTrace reread = load_trace(damaged);
  ASSERT_EQ(reread.status.state, ReadStatus::State::kGap);
  TraceFollower follower(damaged, static_cast<uint32_t>(getpid()));
  Collect seen;
  EXPECT_EQ(follower.poll(seen).state, FollowStatus::State::kClosed);
  EXPECT_TRUE(same_events(seen.events, reread.events));
  EXPECT_LT(seen.events.size(), expected.events.size());
  EXPECT_EQ(follower.status().gaps, 1u);
  EXPECT_EQ(seen.end_status.state, ReadStatus::State::kGap);
}

TEST(ReaderFollow, AFileThatIsNotATraceIsRefusedAsReadTraceRefusesIt) {
  Scratch dir;
  const std::string path = dir.path("not.pstrace");
  append(path, std::string(200, 'x'));
  TraceFollower follower(path);
  Collect seen;
  EXPECT_THROW(follower.poll(seen), TraceError);
}

}  // namespace
}  // namespace psc
