// Builds synthetic .pstrace files the way the recorder would write them: the
// golden traces of the analysis tests, the inputs of the benchmarks, and small
// examples for docs. Every event gets the next sequence number, a clock that
// advances by a fixed step, and the innermost range open on its thread, so a
// test states only what happened and the answer follows by construction.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "format/event.h"
#include "traces/writer.h"

namespace psc {

class SyntheticTrace {
 public:
  // Throws std::runtime_error when the file cannot be created.
  explicit SyntheticTrace(const std::string& path, const TraceWriterOptions& options = {});

  void name_thread(uint32_t thread, std::string_view name, uint64_t os_tid = 0);

  void push(uint32_t thread, std::string_view name);
  void pop(uint32_t thread);
  void mark(uint32_t thread, std::string_view name, std::string_view payload = {});
  // push("wave") followed by the payload mark, as the Python helper does.
  void wave_begin(uint32_t thread, std::string_view payload_json);
  void wave_end(uint32_t thread) { pop(thread); }
  // Process-wide ranges (NVTX start/end).
  void range_start(uint32_t thread, uint64_t id, std::string_view name, std::string_view payload = {});
  void range_end(uint32_t thread, uint64_t id);

  struct Memory {
    uint8_t flags = 0;  // EventFlag
    int16_t device = 0;
    MemoryKind memory = MemoryKind::kDevice;
    Api api = Api::kCudaMalloc;
  };
  void alloc(uint32_t thread, uint64_t address, uint64_t bytes) { alloc(thread, address, bytes, Memory{}); }
  void alloc(uint32_t thread, uint64_t address, uint64_t bytes, const Memory& how);
  void free(uint32_t thread, uint64_t address) { free(thread, address, Memory{}); }
  void free(uint32_t thread, uint64_t address, const Memory& how, uint64_t bytes = 0);
  void map(uint32_t thread, uint64_t address, uint64_t bytes, EventKind kind = EventKind::kMap);
  void counter(uint32_t thread, std::string_view name, uint64_t value, int16_t device = -1);

  // What CUPTI reports after the fact (kFlagDeferred): the next sequence
  // number, but `time_ns` in the past (the trace's clock does not move), no
  // range. Allocations and frees are Api::kCupti with the source library in
  // Event::name, as the recorder writes them.
  void cupti_alloc(uint32_t thread, uint64_t time_ns, uint64_t address, uint64_t bytes, std::string_view source,
                   int16_t device = 0);
  void cupti_free(uint32_t thread, uint64_t time_ns, uint64_t address, int16_t device = 0);
  // A deferred mark (cupti.first_kernel, ...) placed at time_ns.
  void deferred_mark(uint32_t thread, uint64_t time_ns, std::string_view name, std::string_view payload);

  void drops(const std::array<uint64_t, format::kDropReasonCount>& counts) { writer_.drops(counts); }
  void close(bool clean_end = true) { writer_.close(clean_end); }

  uint64_t events() const { return writer_.events_written(); }
  uint64_t now_ns() const { return time_ns_; }
  uint64_t last_seq() const { return seq_; }
  // Makes the next event's sequence number jump (a dropped or late event).
  void skip_seq(uint64_t n) { seq_ += n; }

  static constexpr uint64_t kStartTimeNs = 1'000'000'000;
  static constexpr uint64_t kTimeStepNs = 1000;

 private:
  Event next(uint32_t thread, EventKind kind);
  Event deferred(uint32_t thread, EventKind kind, uint64_t time_ns);
  std::vector<StringId>& stack(uint32_t thread);

  TraceWriter writer_;
  std::vector<std::vector<StringId>> stacks_;
  std::vector<bool> named_;
  uint64_t seq_ = 0;
  uint64_t time_ns_ = kStartTimeNs;
};

}  // namespace psc
