// common/parallel.h: traces analysed side by side come back in order, with
// the exception a loop would have met first; progress shows only on the
// thread that installed it (common/progress.h).
#include "common/parallel.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <mutex>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>

#include "common/progress.h"

namespace psc {
namespace {

TEST(ParallelMap, ResultsComeBackInOrderFromSeveralThreads) {
  std::mutex mutex;
  std::set<std::thread::id> ran_on;
  std::vector<size_t> told;
  const std::vector<std::string> out = parallel_map<std::string>(
      40, 4,
      [&](size_t i) {
        {
          std::lock_guard<std::mutex> lock(mutex);
          ran_on.insert(std::this_thread::get_id());
        }
        std::this_thread::sleep_for(std::chrono::microseconds((40 - i) * 50));  // later ones end first
        return "trace " + std::to_string(i);
      },
      [&](size_t i) { told.push_back(i); });
  ASSERT_EQ(out.size(), 40u);
  for (size_t i = 0; i < out.size(); ++i) EXPECT_EQ(out[i], "trace " + std::to_string(i));
  EXPECT_GT(ran_on.size(), 1u);
  EXPECT_EQ(ran_on.count(std::this_thread::get_id()), 0u);  // the caller waits
  std::sort(told.begin(), told.end());
  for (size_t i = 0; i < told.size(); ++i) EXPECT_EQ(told[i], i);
  EXPECT_EQ(told.size(), 40u);
}

TEST(ParallelMap, OneThreadIsALoopOnTheCaller) {
  std::vector<std::thread::id> ran_on;
  const std::vector<int> out = parallel_map<int>(5, 1, [&](size_t i) {
    ran_on.push_back(std::this_thread::get_id());
    return static_cast<int>(i * i);
  });
  EXPECT_EQ(out, (std::vector<int>{0, 1, 4, 9, 16}));
  for (const std::thread::id& id : ran_on) EXPECT_EQ(id, std::this_thread::get_id());
}

TEST(ParallelMap, TheFirstFailureInOrderIsRethrownAfterAllEnd) {
  std::atomic<int> ran{0};
  try {
    parallel_map<int>(12, 3, [&](size_t i) -> int {
      ++ran;
      if (i == 9) throw std::invalid_argument("nine");
      if (i == 4) {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));  // fails after nine did
        throw std::out_of_range("four");
      }
      return 0;
    });
    ADD_FAILURE() << "nothing was thrown";
  } catch (const std::out_of_range& e) {
    EXPECT_STREQ(e.what(), "four");
  }
  EXPECT_EQ(ran.load(), 12);
}

TEST(ParallelMap, TraceThreadsFollowTheEnvironmentAndTheTraces) {
  EXPECT_EQ(trace_threads(0), 1u);
  EXPECT_EQ(trace_threads(1), 1u);
  ::setenv("PEAKSCOPE_TRACE_THREADS", "3", 1);
  EXPECT_EQ(trace_threads(8), 3u);
  EXPECT_EQ(trace_threads(2), 2u);
  ::setenv("PEAKSCOPE_TRACE_THREADS", "1", 1);
  EXPECT_EQ(trace_threads(8), 1u);
  ::unsetenv("PEAKSCOPE_TRACE_THREADS");
  EXPECT_LE(trace_threads(8), 4u);
  EXPECT_GE(trace_threads(8), 1u);
}

TEST(Progress, OnlyTheInstallingThreadShowsProgress) {
  uint64_t now = 0;
  std::string shown;
  ProgressReporter reporter(
      true, [&now] { return now += 1'000'000'000; }, [&shown](std::string_view s) { shown += s; });
  ProgressScope scope(reporter);
  std::thread other([] {
    progress_stage("elsewhere", 10);
    progress_advance(5);
  });
  other.join();
  EXPECT_EQ(shown, "");
  progress_stage("here", 10);
  progress_advance(5);
  EXPECT_NE(shown.find("here"), std::string::npos) << shown;
  EXPECT_EQ(shown.find("elsewhere"), std::string::npos) << shown;
}

}  // namespace
}  // namespace psc
