// Live CUDA blocks: address -> (bytes, device, memory kind), so that a free —
// which names only an address — is recorded with the size, device and kind
// of what it frees. The analysis pairs frees with allocations by (device,
// address): a free must carry the allocation's device even when another
// device is current.
//
// Cost: one lock-free probe of an mmap'd open-addressing table per hooked
// allocation and free (interpose/block_table.h), made by the outermost hook
// only; a nested hook (cudaMalloc -> cuMemAlloc_v2) reuses what its outer
// hook found, through a thread-local.
#include "interpose/block_table.h"
#include "interpose/cuda_hooks.h"
#include "runtime/drops.h"

namespace psc::interpose::cuda {
namespace {

// bytes: 48 bits (256 TiB), device + 1: 8 bits, memory kind: 8 bits. A packed
// value is never 0 (the kind is never kNone), which BlockTable reads as absent.
constexpr uint64_t kBytesMask = (1ull << 48) - 1;

uint64_t pack(uint64_t bytes, int16_t device, MemoryKind kind) {
  const uint64_t d = static_cast<uint64_t>(static_cast<uint8_t>(device + 1));
  return (bytes & kBytesMask) | (d << 48) | (static_cast<uint64_t>(kind) << 56);
}
uint64_t bytes_of(uint64_t packed) { return packed & kBytesMask; }
int16_t device_of(uint64_t packed) { return static_cast<int16_t>(static_cast<int>((packed >> 48) & 0xff) - 1); }
MemoryKind kind_of(uint64_t packed) { return static_cast<MemoryKind>(packed >> 56); }

BlockTable g_blocks;
std::atomic<int> g_blocks_state{0};  // 0: not mapped, 1: mapping, 2: ready, 3: failed

// The table is 32 MiB of reserved address space, mapped on the first CUDA
// allocation of the process (no cost for processes that make none).
PSC_NOINLINE bool map_table() {
  int expected = 0;
  if (g_blocks_state.compare_exchange_strong(expected, 1, std::memory_order_acq_rel)) {
    g_blocks_state.store(g_blocks.init() ? 2 : 3, std::memory_order_release);
  }
  int state;
  while ((state = g_blocks_state.load(std::memory_order_acquire)) == 1) sys::sleep_ns(1000);
  return state == 2;
}

inline bool table_ready() { return PSC_LIKELY(g_blocks_state.load(std::memory_order_acquire) == 2) || map_table(); }

// The block the outermost hook on this thread is freeing right now.
struct OuterFree {
  uint64_t address;
  uint64_t packed;
};
__thread OuterFree t_outer_free;

}  // namespace

int16_t runtime_device() {
  using Fn = int (*)(int*);
  Fn get = runtime_real<Fn>(RuntimeFn::kGetDevice);
  int device = -1;
  return (get && get(&device) == 0) ? static_cast<int16_t>(device) : int16_t{-1};
}

int16_t driver_device() {
  using Fn = int (*)(int*);
  Fn get = driver_real<Fn>(DriverFn::kCtxGetDevice);
  int device = -1;
  return (get && get(&device) == 0) ? static_cast<int16_t>(device) : int16_t{-1};
}

void record_alloc(const rt::HookGuard& guard, const AllocRecord& r) {
  if (!guard.nested() && table_ready() && !g_blocks.insert(r.address, pack(r.bytes, r.device, r.memory)))
    rt::count_drop(format::DropReason::kAddressTable);
  rt::record_memory({EventKind::kAlloc, r.address, r.bytes, r.memory, r.api, r.device, r.stream, guard.nested_flag()});
}

void record_failed_alloc(const rt::HookGuard& guard, const AllocRecord& r) {
  rt::record_memory({EventKind::kAlloc, 0, r.bytes, r.memory, r.api, r.device, r.stream,
                     static_cast<uint8_t>(guard.nested_flag() | kFlagFailed)});
}

void record_free(const rt::HookGuard& guard, Api api, MemoryKind fallback, uint64_t address, uint64_t stream,
                 DeviceQuery device) {
  uint64_t packed = 0;
  if (!guard.nested()) {
    if (table_ready()) packed = g_blocks.remove(address);
    t_outer_free = OuterFree{address, packed};
  } else if (t_outer_free.address == address) {
    packed = t_outer_free.packed;
  }
  const int16_t d = packed ? device_of(packed) : device();
  rt::record_memory({EventKind::kFree, address, bytes_of(packed), packed ? kind_of(packed) : fallback, api, d, stream,
                     guard.nested_flag()});
}

}  // namespace psc::interpose::cuda
