// Several traces at once: the commands that read many traces (report of a
// run, calibrate, check) analyse them side by side, each on a thread of its
// own, and use the results in the traces' order, as a loop would.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <exception>
#include <functional>
#include <mutex>
#include <optional>
#include <thread>
#include <utility>
#include <vector>

namespace psc {

// How many traces to analyse at once: PEAKSCOPE_TRACE_THREADS when set (1:
// one after another), else one per processor, at most 4, never more than
// there are traces.
unsigned trace_threads(size_t traces);

// f(i) for every i in [0, n), on `threads` threads beside the caller (none
// when threads <= 1 or n <= 1: then the caller runs them in turn, as a loop).
// The caller waits and calls on_done(i) as each one ends, in the order they
// end (for progress). Results come back in the order of i. When some f(i)
// throw, every f still runs to its end and the exception of the smallest i
// is rethrown: the one a loop would have met first.
template <typename T>
std::vector<T> parallel_map(size_t n, unsigned threads, const std::function<T(size_t)>& f,
                            const std::function<void(size_t)>& on_done = {}) {
  std::vector<T> results;
  results.reserve(n);
  if (threads <= 1 || n <= 1) {
    for (size_t i = 0; i < n; ++i) {
      results.push_back(f(i));
      if (on_done) on_done(i);
    }
    return results;
  }
  std::vector<std::optional<T>> slots(n);
  std::vector<std::exception_ptr> failures(n);
  std::mutex mutex;
  std::condition_variable ended;
  std::vector<size_t> finished;  // indices ended and not yet told to on_done
  size_t next = 0;
  auto work = [&] {
    for (;;) {
      size_t i;
      {
        std::lock_guard<std::mutex> lock(mutex);
        if (next == n) return;
        i = next++;
      }
      try {
        slots[i].emplace(f(i));
      } catch (...) {
        failures[i] = std::current_exception();
      }
      {
        std::lock_guard<std::mutex> lock(mutex);
        finished.push_back(i);
      }
      ended.notify_one();
    }
  };
  std::vector<std::thread> pool;
  const size_t count = std::min<size_t>(threads, n);
  for (size_t t = 0; t < count; ++t) pool.emplace_back(work);
  for (size_t told = 0; told < n;) {
    std::vector<size_t> now;
    {
      std::unique_lock<std::mutex> lock(mutex);
      ended.wait(lock, [&] { return !finished.empty(); });
      now.swap(finished);
    }
    for (size_t i : now)
      if (on_done) on_done(i);
    told += now.size();
  }
  for (std::thread& t : pool) t.join();
  for (size_t i = 0; i < n; ++i)
    if (failures[i]) std::rethrow_exception(failures[i]);
  for (std::optional<T>& r : slots) results.push_back(std::move(*r));
  return results;
}

}  // namespace psc
