// The progress reporter (common/progress.h) on a fake clock and a forced
// terminal: nothing before a second, at most four lines a second, each one
// rewriting the last with "\r", and a clean line at the end; nothing at all
// when stderr is not a terminal.
#include "common/progress.h"

#include <gtest/gtest.h>

#include <string>

namespace psc {
namespace {

constexpr uint64_t kMs = 1'000'000;

struct Fake {
  uint64_t now = 0;
  std::string out;
  ProgressReporter::Clock clock() {
    return [this] { return now; };
  }
  ProgressReporter::Sink sink() {
    return [this](std::string_view s) { out += s; };
  }
};

TEST(Progress, SilentBeforeOneSecondThenAtMostFourTimesASecond) {
  Fake f;
  ProgressReporter p(true, f.clock(), f.sink());
  p.stage("reading t.pstrace (2 of 2)", 4'000'000);
  for (int i = 0; i < 9; ++i) {
    f.now += 100 * kMs;  // 0.1 .. 0.9 s
    p.advance(100'000);
  }
  EXPECT_EQ(f.out, "");
  f.now = 1000 * kMs;
  p.advance(100'000);
  EXPECT_EQ(f.out, "\rpeakscope: reading t.pstrace (2 of 2): 1.0 M of 4.0 M (25%), 1 s");
  f.out.clear();
  f.now += 100 * kMs;
  p.advance(100'000);
  EXPECT_EQ(f.out, "") << "within 250 ms of the last line";
  f.now += 150 * kMs;
  p.advance(100'000);
  EXPECT_EQ(f.out, "\rpeakscope: reading t.pstrace (2 of 2): 1.2 M of 4.0 M (30%), 1 s");
  f.out.clear();
  p.clear();
  const std::string line = "peakscope: reading t.pstrace (2 of 2): 1.2 M of 4.0 M (30%), 1 s";
  EXPECT_EQ(f.out, "\r" + std::string(line.size(), ' ') + "\r");
  f.out.clear();
  p.clear();
  EXPECT_EQ(f.out, "") << "cleared once";
}

TEST(Progress, UnknownTotalAndAShorterLinePadsOverTheLonger) {
  Fake f;
  ProgressReporter p(true, f.clock(), f.sink());
  p.stage("a long label for the first step", 0);
  f.now = 2000 * kMs;
  p.advance(2'500'000);
  EXPECT_EQ(f.out, "\rpeakscope: a long label for the first step: 2.5 M, 2 s");
  f.out.clear();
  p.stage("short", 0);
  f.now += 300 * kMs;
  p.advance(1);
  const std::string shown = "peakscope: short: 0.0 M, 2 s";
  const size_t longer = std::string("peakscope: a long label for the first step: 2.5 M, 2 s").size();
  EXPECT_EQ(f.out, "\r" + shown + std::string(longer - shown.size(), ' '));
}

TEST(Progress, NothingWhenNotATerminal) {
  Fake f;
  {
    ProgressReporter p(false, f.clock(), f.sink());
    ProgressScope scope(p);
    progress_stage("reading", 10);
    f.now = 10'000 * kMs;
    progress_advance(5);
    progress_done();
  }
  EXPECT_EQ(f.out, "");
}

TEST(Progress, TheScopeRoutesTheFreeFunctionsAndTheDestructorClears) {
  Fake f;
  progress_advance(1);  // none installed: nothing happens
  {
    ProgressReporter p(true, f.clock(), f.sink());
    ProgressScope scope(p);
    progress_stage("step", 0);
    f.now = 1500 * kMs;
    progress_advance(1'000'000);
    EXPECT_EQ(f.out, "\rpeakscope: step: 1.0 M, 2 s");
    f.out.clear();
  }
  EXPECT_EQ(f.out, "\r" + std::string(std::string("peakscope: step: 1.0 M, 2 s").size(), ' ') + "\r");
}

}  // namespace
}  // namespace psc
