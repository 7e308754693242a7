// Driver entry points: which driver we forward to, and which wrapper a looked-up
// pointer gets.
//
// Binding: the driver is the object that holds the first lookup function
// (cuGetProcAddress*) we see — through dlsym on its handle, or, for programs
// linked against libcuda, the next definition after us or a loaded
// "libcuda.so.1". Every function in kDriverEntries is then resolved from that
// object once.
//
// Identification: cuGetProcAddress("cuMemAlloc", 13000, flags) may return
// cuMemAlloc_v2, the CUDA 2.0 cuMemAlloc with 32-bit sizes, a _ptsz variant,
// or something we have never heard of. We compare the returned pointer with
// the bound driver's own symbols and hand out the wrapper of the one it is —
// never a wrapper chosen from the requested name, whose ABI may differ. A
// pointer that matches nothing is returned untouched; when the request named
// a function we meant to hook, a mark says its calls will be missing.
#include <dlfcn.h>

#include <cstring>

#define __CUDA_API_VERSION_INTERNAL 1
#include <cuda.h>

#include "interpose/cuda_hooks.h"

namespace psc::interpose::cuda {

std::atomic<void*> g_driver_real[kDriverFnCount];

namespace {

std::atomic<bool> g_driver_bound{false};

const void* own_base() {
  static const void* base = [] {
    Dl_info info{};
    return dladdr(reinterpret_cast<void*>(&own_base), &info) ? info.dli_fbase : nullptr;
  }();
  return base;
}

// Racing threads may both bind; they store the same values.
void bind_driver_from_handle(void* handle) {
  DlsymFn lookup = real_dlsym();
  for (int i = 0; i < kDriverFnCount; ++i) {
    void* p = lookup(handle, kDriverEntries[i].name);
    if (p) g_driver_real[i].store(p, std::memory_order_release);
  }
  g_driver_bound.store(true, std::memory_order_release);
}

// Binds the driver that defines `function`. False when it is ours or unknown.
bool bind_driver_from(void* function) {
  if (g_driver_bound.load(std::memory_order_acquire)) return true;
  Dl_info info{};
  if (!dladdr(function, &info) || !info.dli_fname || info.dli_fbase == own_base()) return false;
  void* handle = dlopen(info.dli_fname, RTLD_NOLOAD | RTLD_LAZY);
  if (!handle) {
    dlerror();  // leave no error behind for the application's next dlerror()
    return false;
  }
  bind_driver_from_handle(handle);
  return true;
}

int entry_index(const char* name) {
  for (int i = 0; i < kDriverFnCount; ++i)
    if (strcmp(kDriverEntries[i].name, name) == 0) return i;
  return -1;
}

bool names_hooked_base(const char* requested) {
  if (!requested) return false;
  for (const DriverEntry& e : kDriverEntries)
    if (e.wrapper && strcmp(e.base, requested) == 0) return true;
  return false;
}

// {"symbol":"cuMemAlloc"} without stdio: names are short driver identifiers.
void mark_unwrapped(const char* requested) {
  char payload[160] = "{\"symbol\":\"";
  size_t n = strlen(payload);
  for (const char* s = requested; *s && n < sizeof payload - 4; ++s) {
    if (*s == '"' || *s == '\\') continue;
    payload[n++] = *s;
  }
  payload[n++] = '"';
  payload[n++] = '}';
  payload[n] = 0;
  rt::record_mark("peakscope/unwrapped_driver_entry", payload, Api::kNone);
}

}  // namespace

bool is_our_driver_wrapper(const void* p) {
  for (const DriverEntry& e : kDriverEntries)
    if (e.wrapper && e.wrapper == p) return true;
  return false;
}

void* driver_real_slow(DriverFn fn) {
  if (!g_driver_bound.load(std::memory_order_acquire)) {
    // An exported wrapper called before any lookup: a program linked against
    // the driver, or one that loaded it and calls through our exports.
    if (void* next = real_dlsym()(RTLD_NEXT, "cuGetProcAddress")) {
      bind_driver_from(next);
    } else if (void* handle = dlopen("libcuda.so.1", RTLD_NOLOAD | RTLD_LAZY)) {
      bind_driver_from_handle(handle);
    } else {
      dlerror();
    }
  }
  return g_driver_real[static_cast<int>(fn)].load(std::memory_order_acquire);
}

void* wrap_driver_pointer(const char* requested, void* p) {
  if (!p || is_our_driver_wrapper(p)) return p;
  for (int i = 0; i < kDriverFnCount; ++i) {
    if (g_driver_real[i].load(std::memory_order_acquire) == p)
      return kDriverEntries[i].wrapper ? kDriverEntries[i].wrapper : p;
  }
  if (names_hooked_base(requested)) mark_unwrapped(requested);
  return p;
}

void* wrap_driver_symbol(const char* name, void* p) {
  const int i = entry_index(name);
  if (i < 0) return p;
  if (!g_driver_bound.load(std::memory_order_acquire)) bind_driver_from(p);
  return wrap_driver_pointer(name, p);
}

}  // namespace psc::interpose::cuda

using namespace psc::interpose::cuda;

// ---- the lookups -----------------------------------------------------------------
// Return codes and the query status are the driver's, untouched; only a
// successful, non-null pointer is swapped.

extern "C" __attribute__((visibility("hidden"))) CUresult psc_cuGetProcAddress(const char* symbol, void** pfn,
                                                                               int version, cuuint64_t flags) {
  using Fn = CUresult (*)(const char*, void**, int, cuuint64_t);
  Fn real = driver_real<Fn>(DriverFn::kGetProcAddress);
  if (!real) return CUDA_ERROR_NOT_INITIALIZED;
  psc::rt::HookGuard guard;
  const CUresult r = real(symbol, pfn, version, flags);
  if (r == CUDA_SUCCESS && pfn) *pfn = wrap_driver_pointer(symbol, *pfn);
  return r;
}

extern "C" __attribute__((visibility("hidden"))) CUresult psc_cuGetProcAddress_v2(
    const char* symbol, void** pfn, int version, cuuint64_t flags, CUdriverProcAddressQueryResult* status) {
  using Fn = CUresult (*)(const char*, void**, int, cuuint64_t, CUdriverProcAddressQueryResult*);
  Fn real = driver_real<Fn>(DriverFn::kGetProcAddress_v2);
  if (!real) return CUDA_ERROR_NOT_INITIALIZED;
  psc::rt::HookGuard guard;
  const CUresult r = real(symbol, pfn, version, flags, status);
  if (r == CUDA_SUCCESS && pfn) *pfn = wrap_driver_pointer(symbol, *pfn);
  return r;
}

// Exported under the driver's names for programs that link libcuda directly.
extern "C" __attribute__((visibility("default"), alias("psc_cuGetProcAddress"), nothrow)) CUresult cuGetProcAddress(
    const char*, void**, int, cuuint64_t);
extern "C" __attribute__((visibility("default"), alias("psc_cuGetProcAddress_v2"), nothrow)) CUresult
cuGetProcAddress_v2(const char*, void**, int, cuuint64_t, CUdriverProcAddressQueryResult*);
