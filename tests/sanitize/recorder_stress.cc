// The recorder's lock-free code under ThreadSanitizer. The runtime is linked
// straight into this program (no interposed allocator, no LD_PRELOAD), so TSan
// sees every access of producers, the writer thread and the flush handshake.
// Writes a trace and checks it is complete and in order.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "peakscope/peakscope.h"
#include "runtime/recorder.h"
#include "traces/reader.h"

namespace {

// Threads that record a few pairs and end, kChurnAlive at a time, more of
// them than the recorder has slots (1024): buffers pass from dead threads to
// new ones while the writer drains. None may be dropped. (Under TSan threads
// start too slowly to take every slot within one writer cycle, so a thread
// rarely waits for a slot here (runtime/recorder.cc, wait_for_slot); kept
// alive instead, 980 threads made this run take minutes.)
constexpr int kChurnThreads = 1500;
constexpr int kChurnAlive = 30;
constexpr int kChurnPairs = 5;

void record_pair(uint64_t address) {
  psc::rt::record_memory({psc::EventKind::kAlloc, address, 4096, psc::MemoryKind::kHost, psc::Api::kPosixMemalign});
  psc::rt::record_memory({psc::EventKind::kFree, address, 4096, psc::MemoryKind::kHost, psc::Api::kLibcFree});
}

void churn() {
  for (int started = 0; started < kChurnThreads; started += kChurnAlive) {
    std::vector<std::thread> wave;
    for (int t = started; t < started + kChurnAlive && t < kChurnThreads; ++t) {
      wave.emplace_back([t] {
        for (int i = 0; i < kChurnPairs; ++i) record_pair((uint64_t(t + 100) << 32) + uint64_t(i) * 64);
      });
    }
    for (auto& w : wave) w.join();
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: recorder_stress TRACE (run with PEAKSCOPE_OUTPUT=TRACE PEAKSCOPE_PRIMARY_PID=$$)\n");
    return 2;
  }
  constexpr int kThreads = 8;
  constexpr int kPairs = 20000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([t] {
      const std::string layer = "forward/layer." + std::to_string(t);
      for (int i = 0; i < kPairs; ++i) {
        if (i % 1000 == 0) psc_range_push(layer.c_str());
        const uint64_t address = (uint64_t(t + 1) << 32) + uint64_t(i) * 64;
        psc::rt::record_memory(
            {psc::EventKind::kAlloc, address, 4096, psc::MemoryKind::kHost, psc::Api::kPosixMemalign});
        psc::rt::record_memory({psc::EventKind::kFree, address, 4096, psc::MemoryKind::kHost, psc::Api::kLibcFree});
        if (i % 1000 == 999) psc_range_pop();
        if (i % 5000 == 0) psc_flush();
      }
    });
  }
  for (auto& t : threads) t.join();
  churn();
  psc_flush();
  psc::ReadOptions one_thread;
  one_thread.decode_threads = 0;
  psc::LoadedTrace trace = psc::load_trace(argv[1], one_thread);
  // Forced flushes may write an in-flight event after a later one (counted as
  // late in the trace); none may be lost: sorted, the sequence runs 1..N.
  std::vector<uint64_t> seqs;
  uint64_t memory = 0, out_of_order = 0, previous = 0;
  for (const psc::Event& e : trace.events) {
    seqs.push_back(e.seq);
    out_of_order += e.seq < previous;  // behind the highest sequence written before it
    previous = std::max(previous, e.seq);
    memory += psc::is_memory_event(e.kind);
  }
  std::sort(seqs.begin(), seqs.end());
  for (size_t i = 0; i < seqs.size(); ++i) {
    if (seqs[i] != i + 1) {
      std::fprintf(stderr, "event with sequence %zu is missing\n", i + 1);
      return 1;
    }
  }
  if (out_of_order != trace.meta.late_events) {
    std::fprintf(stderr, "%llu events out of order but the trace counts %llu late\n",
                 static_cast<unsigned long long>(out_of_order),
                 static_cast<unsigned long long>(trace.meta.late_events));
    return 1;
  }
  constexpr uint64_t kMemoryEvents = 2ull * kThreads * kPairs + 2ull * kChurnThreads * kChurnPairs;
  if (memory != kMemoryEvents) {
    std::fprintf(stderr, "expected %llu memory events, read %llu\n", static_cast<unsigned long long>(kMemoryEvents),
                 static_cast<unsigned long long>(memory));
    return 1;
  }
  if (const uint64_t no_slot = trace.meta.drops[static_cast<size_t>(psc::format::DropReason::kNoThreadSlot)]) {
    std::fprintf(stderr, "%llu events dropped for want of a thread slot\n", static_cast<unsigned long long>(no_slot));
    return 1;
  }
  // The reader's decoding threads (traces/reader.h) under TSan: the same
  // events, byte for byte, as the read on one thread above.
  psc::ReadOptions threaded;
  threaded.decode_threads = 3;
  const psc::LoadedTrace again = psc::load_trace(argv[1], threaded);
  if (again.events.size() != trace.events.size() ||
      std::memcmp(again.events.data(), trace.events.data(), trace.events.size() * sizeof(psc::Event)) != 0) {
    std::fprintf(stderr, "the trace read with 3 decoding threads differs from the read on one\n");
    return 1;
  }
  std::printf("ok recorder under TSan: %zu events, none missing, %llu late, %llu dropped\n", trace.events.size(),
              static_cast<unsigned long long>(trace.meta.late_events),
              static_cast<unsigned long long>(trace.meta.dropped_total()));
  return 0;
}
