#include "tests/support/synthetic_trace.h"

#include <string>

namespace psc {

SyntheticTrace::SyntheticTrace(const std::string& path, const TraceWriterOptions& options) : writer_(path, options) {}

std::vector<StringId>& SyntheticTrace::stack(uint32_t thread) {
  if (thread >= stacks_.size()) {
    stacks_.resize(thread + 1);
    named_.resize(thread + 1);
  }
  // The recorder names a thread before its first event; do the same.
  if (!named_[thread]) name_thread(thread, "thread-" + std::to_string(thread), 1000 + thread);
  return stacks_[thread];
}

void SyntheticTrace::name_thread(uint32_t thread, std::string_view name, uint64_t os_tid) {
  if (thread >= named_.size()) {
    stacks_.resize(thread + 1);
    named_.resize(thread + 1);
  }
  named_[thread] = true;
  writer_.thread(thread, os_tid, name);
}

Event SyntheticTrace::next(uint32_t thread, EventKind kind) {
  Event e{};
  e.seq = ++seq_;
  time_ns_ += kTimeStepNs;
  e.time_ns = time_ns_;
  e.thread = thread;
  e.kind = kind;
  e.device = -1;
  const std::vector<StringId>& open = stack(thread);
  if (!open.empty()) e.range = open.back();
  e.api = Api::kPscApi;
  return e;
}

void SyntheticTrace::push(uint32_t thread, std::string_view name) {
  Event e = next(thread, EventKind::kRangePush);
  e.name = writer_.intern(name);
  writer_.event(e);
  stack(thread).push_back(e.name);
}

void SyntheticTrace::pop(uint32_t thread) {
  Event e = next(thread, EventKind::kRangePop);
  std::vector<StringId>& open = stack(thread);
  if (!open.empty()) {
    e.name = open.back();
    open.pop_back();
  }
  writer_.event(e);
}

void SyntheticTrace::mark(uint32_t thread, std::string_view name, std::string_view payload) {
  Event e = next(thread, EventKind::kMark);
  e.name = writer_.intern(name);
  e.payload = writer_.intern(payload);
  writer_.event(e);
}

void SyntheticTrace::wave_begin(uint32_t thread, std::string_view payload_json) {
  push(thread, "wave");
  mark(thread, "wave", payload_json);
}

void SyntheticTrace::range_start(uint32_t thread, uint64_t id, std::string_view name, std::string_view payload) {
  Event e = next(thread, EventKind::kRangeStart);
  e.address = id;
  e.name = writer_.intern(name);
  e.payload = writer_.intern(payload);
  writer_.event(e);
}

void SyntheticTrace::range_end(uint32_t thread, uint64_t id) {
  Event e = next(thread, EventKind::kRangeEnd);
  e.address = id;
  writer_.event(e);
}

void SyntheticTrace::alloc(uint32_t thread, uint64_t address, uint64_t bytes, const Memory& how) {
  Event e = next(thread, EventKind::kAlloc);
  e.address = address;
  e.bytes = bytes;
  e.flags = how.flags;
  e.device = how.device;
  e.memory = how.memory;
  e.api = how.api;
  writer_.event(e);
}

void SyntheticTrace::free(uint32_t thread, uint64_t address, const Memory& how, uint64_t bytes) {
  Event e = next(thread, EventKind::kFree);
  e.address = address;
  e.bytes = bytes;
  e.flags = how.flags;
  e.device = how.device;
  e.memory = how.memory;
  e.api = how.api;
  writer_.event(e);
}

void SyntheticTrace::map(uint32_t thread, uint64_t address, uint64_t bytes, EventKind kind) {
  Event e = next(thread, kind);
  e.address = address;
  e.bytes = bytes;
  e.device = 0;
  e.memory = MemoryKind::kVmmPhysical;
  e.api = kind == EventKind::kMap ? Api::kCuMemMap : Api::kCuMemUnmap;
  writer_.event(e);
}

void SyntheticTrace::counter(uint32_t thread, std::string_view name, uint64_t value, int16_t device) {
  Event e = next(thread, EventKind::kCounter);
  e.name = writer_.intern(name);
  e.bytes = value;
  e.device = device;
  writer_.event(e);
}

Event SyntheticTrace::deferred(uint32_t thread, EventKind kind, uint64_t time_ns) {
  stack(thread);  // names the thread before its first event
  Event e{};
  e.seq = ++seq_;
  e.time_ns = time_ns;
  e.thread = thread;
  e.kind = kind;
  e.device = -1;
  e.api = Api::kCupti;
  e.flags = kFlagDeferred;
  return e;
}

void SyntheticTrace::cupti_alloc(uint32_t thread, uint64_t time_ns, uint64_t address, uint64_t bytes,
                                 std::string_view source, int16_t device) {
  Event e = deferred(thread, EventKind::kAlloc, time_ns);
  e.address = address;
  e.bytes = bytes;
  e.device = device;
  e.memory = MemoryKind::kDevice;
  e.name = source.empty() ? StringId{} : writer_.intern(source);
  writer_.event(e);
}

void SyntheticTrace::cupti_free(uint32_t thread, uint64_t time_ns, uint64_t address, int16_t device) {
  Event e = deferred(thread, EventKind::kFree, time_ns);
  e.address = address;
  e.device = device;
  e.memory = MemoryKind::kDevice;
  writer_.event(e);
}

void SyntheticTrace::deferred_mark(uint32_t thread, uint64_t time_ns, std::string_view name, std::string_view payload) {
  Event e = deferred(thread, EventKind::kMark, time_ns);
  e.name = writer_.intern(name);
  e.payload = writer_.intern(payload);
  writer_.event(e);
}

}  // namespace psc
