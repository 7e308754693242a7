// PyTorch's native caching allocator, tensor by tensor: a trace tracker
// (c10::cuda::CUDACachingAllocator::attachAllocatorTraceTracker, PyTorch 2.1
// and newer) that forwards every block handed out or given back to the
// recorder's psc_record_tensor_event (include/peakscope/peakscope.h). The allocator's
// behaviour does not change and no history is recorded: the tracker sees each
// event as it happens, with the allocator's lock held, on the thread that
// allocates, so the recorder attributes it to the range open there.
//
// Built at run time against the installed torch by trace_tracker.py (no
// pybind11: one extern "C" entry point, called through ctypes). The recorder
// is found with dlsym in the process: under `peakscope record` (LD_PRELOAD)
// its symbols are global.
//
// Which actions count: ALLOC is a tensor's block becoming live; FREE_REQUESTED
// is PyTorch's free (its allocated-bytes statistic drops there, and the block
// is not reused before it); FREE_COMPLETED (the end of a free delayed by
// record_stream) and the segment actions are left out: the cudaMalloc and VMM
// hooks record segments themselves.
#include <dlfcn.h>

#include <atomic>
#include <cstdint>
#include <exception>
#include <type_traits>

#include <c10/cuda/CUDACachingAllocator.h>

namespace {

using RecordFn = void (*)(int, unsigned long long, unsigned long long, int, unsigned long long);
constexpr int kTensorAlloc = 1;  // PSC_TENSOR_ALLOC
constexpr int kTensorFree = 2;   // PSC_TENSOR_FREE

std::atomic<RecordFn> g_record{nullptr};
std::atomic<unsigned long long> g_forwarded{0};
std::atomic<bool> g_attached{false};

template <typename T>
unsigned long long as_integer(T value) {
  if constexpr (std::is_pointer_v<T>) {
    return static_cast<unsigned long long>(reinterpret_cast<uintptr_t>(value));
  } else {
    return static_cast<unsigned long long>(value);
  }
}

// Generic over the entry type: TraceEntry moved between namespaces (and
// became a template) across PyTorch 2.x; its member names stayed.
struct Forward {
  template <typename Entry>
  void operator()(const Entry& entry) const {
    int action = 0;
    if (entry.action_ == Entry::ALLOC) {
      action = kTensorAlloc;
    } else if (entry.action_ == Entry::FREE_REQUESTED) {
      action = kTensorFree;
    } else {
      return;
    }
    RecordFn record = g_record.load(std::memory_order_relaxed);
    if (!record) return;
    record(action, as_integer(entry.addr_), as_integer(entry.size_), static_cast<int>(entry.device_),
           as_integer(entry.stream_));
    g_forwarded.fetch_add(1, std::memory_order_relaxed);
  }
};

}  // namespace

// 0 attached (or already attached), 1 the recorder is not loaded in this
// process, 2 PyTorch refused (another allocator backend, or not initialised).
extern "C" __attribute__((visibility("default"))) int psc_trace_tracker_attach(void) {
  auto record = reinterpret_cast<RecordFn>(dlsym(RTLD_DEFAULT, "psc_record_tensor_event"));
  if (!record) return 1;
  g_record.store(record, std::memory_order_relaxed);
  if (g_attached.exchange(true)) return 0;
  try {
    c10::cuda::CUDACachingAllocator::attachAllocatorTraceTracker(Forward{});
  } catch (const std::exception&) {
    g_attached.store(false);
    return 2;
  }
  return 0;
}

// Events forwarded so far (for the workload's closing line and the tests).
extern "C" __attribute__((visibility("default"))) unsigned long long psc_trace_tracker_forwarded(void) {
  return g_forwarded.load(std::memory_order_relaxed);
}
