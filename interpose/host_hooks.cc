// Host mode (PEAKSCOPE_HOST=1): the aligned-allocation family that CPU
// frameworks use for tensor storage (PyTorch's CPU allocator calls
// posix_memalign), plus free() and realloc() of the blocks recorded. Every
// block is recorded unless PEAKSCOPE_HOST_MIN_BYTES sets a floor: blocks
// under it are left out (and the trace's header says a floor was set).
//
// When host mode is off every hook is one branch and a tail call.
#include <dlfcn.h>
#include <malloc.h>

#include <cerrno>
#include <cstddef>

#include "interpose/block_table.h"
#include "runtime/config.h"
#include "runtime/drops.h"
#include "runtime/recorder.h"
#include "runtime/sys.h"

extern "C" {
// glibc's own entry points: used until dlsym(RTLD_NEXT) has answered, because
// dlsym itself may allocate and free.
void __libc_free(void*);
void* __libc_memalign(size_t, size_t);
void* __libc_realloc(void*, size_t);
void* __libc_valloc(size_t);
void* __libc_pvalloc(size_t);
}

namespace psc::interpose {
namespace {

using PosixMemalignFn = int (*)(void**, size_t, size_t);
using AlignFn = void* (*)(size_t, size_t);
using SizeFn = void* (*)(size_t);
using FreeFn = void (*)(void*);
using ReallocFn = void* (*)(void*, size_t);

struct RealFunctions {
  PosixMemalignFn posix_memalign;
  AlignFn aligned_alloc;
  AlignFn memalign;
  SizeFn valloc;
  SizeFn pvalloc;
  FreeFn free;
  ReallocFn realloc;
};

RealFunctions g_real;
BlockTable g_blocks;
bool g_host = false;
uint64_t g_min_bytes = 1;

int fallback_posix_memalign(void** out, size_t alignment, size_t size) {
  if (alignment % sizeof(void*) != 0 || (alignment & (alignment - 1)) != 0) return EINVAL;
  void* p = __libc_memalign(alignment, size);
  if (!p) return ENOMEM;
  *out = p;
  return 0;
}

// Large enough to be one of ours? A cheap filter before the table lookup.
bool may_be_tracked(void* p) { return g_host && malloc_usable_size(p) >= g_min_bytes; }

void track(void* p, size_t size, Api api) {
  if (!p || !g_host || size < g_min_bytes || !rt::enabled()) return;
  rt::HookGuard guard;
  if (!g_blocks.insert(reinterpret_cast<uint64_t>(p), size)) {
    rt::count_drop(format::DropReason::kAddressTable);
    return;
  }
  rt::record_memory(
      {EventKind::kAlloc, reinterpret_cast<uint64_t>(p), size, MemoryKind::kHost, api, -1, 0, guard.nested_flag()});
}

// Records the free of a tracked block (before the real free); returns its size or 0.
uint64_t untrack(void* p, Api api) {
  if (!may_be_tracked(p)) return 0;
  const uint64_t bytes = g_blocks.remove(reinterpret_cast<uint64_t>(p));
  if (bytes) {
    rt::HookGuard guard;
    rt::record_memory(
        {EventKind::kFree, reinterpret_cast<uint64_t>(p), bytes, MemoryKind::kHost, api, -1, 0, guard.nested_flag()});
  }
  return bytes;
}

template <typename Fn>
Fn next(const char* name) {
  return reinterpret_cast<Fn>(dlsym(RTLD_NEXT, name));
}

__attribute__((constructor(102))) void resolve_host_functions() {
  RealFunctions r{};
  r.posix_memalign = next<PosixMemalignFn>("posix_memalign");
  r.aligned_alloc = next<AlignFn>("aligned_alloc");
  r.memalign = next<AlignFn>("memalign");
  r.valloc = next<SizeFn>("valloc");
  r.pvalloc = next<SizeFn>("pvalloc");
  r.free = next<FreeFn>("free");
  r.realloc = next<ReallocFn>("realloc");
  g_real = r;
  if (rt::g_config.host_mode && g_blocks.init()) {
    g_min_bytes = rt::g_config.host_min_bytes;
    g_host = true;
  }
}

}  // namespace
}  // namespace psc::interpose

using namespace psc::interpose;
using psc::Api;

PSC_EXPORT int posix_memalign(void** out, size_t alignment, size_t size) {
  const int rc = g_real.posix_memalign ? g_real.posix_memalign(out, alignment, size)
                                       : fallback_posix_memalign(out, alignment, size);
  if (rc == 0) track(*out, size, Api::kPosixMemalign);
  return rc;
}

PSC_EXPORT void* aligned_alloc(size_t alignment, size_t size) {
  void* p = g_real.aligned_alloc ? g_real.aligned_alloc(alignment, size) : __libc_memalign(alignment, size);
  track(p, size, Api::kAlignedAlloc);
  return p;
}

PSC_EXPORT void* memalign(size_t alignment, size_t size) {
  void* p = g_real.memalign ? g_real.memalign(alignment, size) : __libc_memalign(alignment, size);
  track(p, size, Api::kMemalign);
  return p;
}

PSC_EXPORT void* valloc(size_t size) {
  void* p = g_real.valloc ? g_real.valloc(size) : __libc_valloc(size);
  track(p, size, Api::kValloc);
  return p;
}

PSC_EXPORT void* pvalloc(size_t size) {
  void* p = g_real.pvalloc ? g_real.pvalloc(size) : __libc_pvalloc(size);
  track(p, size, Api::kPvalloc);
  return p;
}

PSC_EXPORT void free(void* p) {
  if (p && g_host) untrack(p, Api::kLibcFree);
  if (PSC_LIKELY(g_real.free != nullptr)) {
    g_real.free(p);
  } else {
    __libc_free(p);
  }
}

PSC_EXPORT void* realloc(void* p, size_t size) {
  ReallocFn real = g_real.realloc ? g_real.realloc : __libc_realloc;
  if (!p || !g_host) return real(p, size);
  const uint64_t old_bytes = untrack(p, Api::kRealloc);
  void* q = real(p, size);
  if (old_bytes) {
    if (q) {
      track(q, size, Api::kRealloc);
    } else if (size != 0) {
      track(p, old_bytes, Api::kRealloc);  // the call failed: the old block is still live
    }
  }
  return q;
}
