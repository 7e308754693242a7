// Device-level samples: the bytes in use on the device as the driver counts
// them (cuMemGetInfo), at every wave and layer range boundary, so a report can
// show what no allocator accounts for: the context, modules, library
// workspaces, first executions. Recorded in true order (sampled on the
// annotating thread, not deferred):
//   device_total_bytes   once per device, the device's memory
//   device_used_bytes    total - free, device field set
//
// A boundary is a push, pop, start or end of a range named `wave` or
// `<anything>/layer.<digits>` (forward/layer.3, recompute/layer.0). Only the
// context current on the annotating thread is asked, and only when there is
// one: this never initialises CUDA or creates a context. Needs only the
// driver, so it runs with or without CUPTI.
//
// Cost: nothing for other ranges (one cached byte per name); per sampled
// boundary cuCtxGetCurrent, cuCtxGetDevice and cuMemGetInfo_v2.
#include <pthread.h>

#include <cstring>

#include "interpose/cuda_hooks.h"
#include "interpose/cupti_backend.h"
#include "runtime/strings.h"

namespace psc::interpose::cuda {
namespace {

constexpr uint32_t kClassified = 1u << 15;  // the string table's ids (runtime/strings.cc)
enum : uint8_t { kUnknown = 0, kBoundaryName = 1, kOtherName = 2 };
std::atomic<uint8_t> g_name_class[kClassified + 1];

constexpr int kOpenRanges = 64;  // process-wide (start/end) wave and layer ranges open at once
std::atomic<uint64_t> g_open_ranges[kOpenRanges];

constexpr int kMaxDevices = 64;
std::atomic<uint64_t> g_total_recorded{0};  // bit d: device_total_bytes recorded for device d

bool is_boundary_text(const char* s, size_t n) {
  if (n == 4 && memcmp(s, "wave", 4) == 0) return true;
  size_t digits = n;
  while (digits > 0 && s[digits - 1] >= '0' && s[digits - 1] <= '9') --digits;
  constexpr char kLayer[] = "/layer.";
  constexpr size_t kLayerLength = sizeof kLayer - 1;
  return digits < n && digits > kLayerLength && memcmp(s + digits - kLayerLength, kLayer, kLayerLength) == 0;
}

bool is_boundary_name(uint32_t id) {
  if (id == 0) return false;
  if (id <= kClassified) {
    const uint8_t known = g_name_class[id].load(std::memory_order_relaxed);
    if (known != kUnknown) return known == kBoundaryName;
  }
  size_t length = 0;
  const char* text = rt::string_text(id, &length);
  if (!text) return false;  // still being published by another thread
  const bool boundary = is_boundary_text(text, length);
  if (id <= kClassified) g_name_class[id].store(boundary ? kBoundaryName : kOtherName, std::memory_order_relaxed);
  return boundary;
}

void remember_open_range(uint64_t id) {
  for (auto& slot : g_open_ranges) {
    uint64_t expected = 0;
    if (slot.compare_exchange_strong(expected, id + 1, std::memory_order_acq_rel)) return;
  }
}

bool take_open_range(uint64_t id) {
  for (auto& slot : g_open_ranges) {
    uint64_t expected = id + 1;
    if (slot.compare_exchange_strong(expected, 0, std::memory_order_acq_rel)) return true;
  }
  return false;
}

template <typename Fn>
Fn bound(DriverFn fn) {
  return reinterpret_cast<Fn>(g_driver_real[static_cast<int>(fn)].load(std::memory_order_acquire));
}

void sample_device() {
  using GetCurrentFn = CUresult (*)(CUcontext*);
  using GetDeviceFn = CUresult (*)(CUdevice*);
  using MemGetInfoFn = CUresult (*)(size_t*, size_t*);
  // Only a driver already bound: a process that never used CUDA pays one load.
  const auto get_current = bound<GetCurrentFn>(DriverFn::kCtxGetCurrent);
  const auto get_device = bound<GetDeviceFn>(DriverFn::kCtxGetDevice);
  const auto mem_get_info = bound<MemGetInfoFn>(DriverFn::kMemGetInfo_v2);
  if (!get_current || !get_device || !mem_get_info) return;
  rt::HookGuard guard;
  CUcontext context = nullptr;
  if (get_current(&context) != CUDA_SUCCESS || !context) return;
  CUdevice device = -1;
  size_t free_bytes = 0, total_bytes = 0;
  if (get_device(&device) != CUDA_SUCCESS || device < 0) return;
  if (mem_get_info(&free_bytes, &total_bytes) != CUDA_SUCCESS || free_bytes > total_bytes) return;
  const int16_t d = static_cast<int16_t>(device);
  if (device < kMaxDevices) {
    const uint64_t bit = 1ull << device;
    if (!(g_total_recorded.fetch_or(bit, std::memory_order_relaxed) & bit))
      rt::record_counter("device_total_bytes", total_bytes, d, Api::kNone);
  }
  rt::record_counter("device_used_bytes", total_bytes - free_bytes, d, Api::kNone);
  // A context is current, so CUDA is initialised: if its cuInit went unseen
  // (a pointer we could not wrap), CUPTI starts here instead.
  cupti::start_once();
}

void on_range_boundary(const rt::RangeBoundary& b) {
  if (!rt::enabled()) return;
  switch (b.kind) {
    case EventKind::kRangePush:
    case EventKind::kRangePop:
      if (!is_boundary_name(b.name)) return;
      break;
    case EventKind::kRangeStart:
      if (!is_boundary_name(b.name)) return;
      remember_open_range(b.id);
      break;
    case EventKind::kRangeEnd:
      if (!take_open_range(b.id)) return;
      break;
    default: return;
  }
  sample_device();
}

void forget_in_child() {
  // The child's trace is its own: it says each device's total again.
  g_total_recorded.store(0, std::memory_order_relaxed);
  for (auto& r : g_open_ranges) r.store(0, std::memory_order_relaxed);
}

__attribute__((constructor(103))) void install_device_samples() {
  rt::add_range_boundary_hook(on_range_boundary);
  pthread_atfork(nullptr, nullptr, forget_in_child);
  rt::add_raw_clone_hook(forget_in_child);
}

}  // namespace
}  // namespace psc::interpose::cuda
