// Counters shared by the two test doubles (fake libcuda.so.1 and fake
// libcudart.so.13). Each double keeps its own set, indexed by its own enum,
// and writes them ("name value" per line) to the file named by an environment
// variable when the process exits, so a test can compare what the double saw
// with what the recorder wrote. A process other than the primary one — the
// pid in $FAKE_PRIMARY_PID, else the process that loaded the double — writes
// to "<file>.<pid>" (a child that loads the double after a fork is not primary).
//
// Relaxed atomics only: the doubles sit under the benchmark of the hooks, so
// counting must stay cheap and lock-free.
#pragma once

#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace fake {

template <int N>
class Counts {
 public:
  explicit Counts(const char* const (&names)[N]) : names_(names) {}
  void add(int i, uint64_t v = 1) { values_[i].fetch_add(v, std::memory_order_relaxed); }
  void sub(int i, uint64_t v) { values_[i].fetch_sub(v, std::memory_order_relaxed); }
  void set(int i, uint64_t v) { values_[i].store(v, std::memory_order_relaxed); }
  uint64_t get(int i) const { return values_[i].load(std::memory_order_relaxed); }
  void raise(int i, uint64_t v) {
    uint64_t cur = get(i);
    while (v > cur && !values_[i].compare_exchange_weak(cur, v, std::memory_order_relaxed)) {
    }
  }
  // Adds to a "live" counter and raises the matching "peak" counter.
  void grow(int live, int peak, uint64_t v) { raise(peak, values_[live].fetch_add(v, std::memory_order_relaxed) + v); }
  void clear() {
    for (auto& v : values_) v.store(0, std::memory_order_relaxed);
  }
  // Value by name, for the doubles' query functions; -1 when unknown.
  long long find(const char* name) const {
    for (int i = 0; i < N; ++i)
      if (std::string(names_[i]) == name) return static_cast<long long>(get(i));
    return -1;
  }
  // Writes every counter to the file named by $variable (nothing when unset).
  void dump(const char* variable, pid_t first_pid) const {
    const char* path = getenv(variable);
    if (!path || !*path) return;
    std::string file = path;
    const char* primary = getenv("FAKE_PRIMARY_PID");
    if (primary && *primary) first_pid = static_cast<pid_t>(atol(primary));
    if (getpid() != first_pid) file += "." + std::to_string(getpid());
    FILE* f = fopen(file.c_str(), "w");
    if (!f) return;
    for (int i = 0; i < N; ++i) fprintf(f, "%s %llu\n", names_[i], static_cast<unsigned long long>(get(i)));
    fclose(f);
  }

 private:
  const char* const (&names_)[N];
  std::atomic<uint64_t> values_[N] = {};
};

}  // namespace fake
