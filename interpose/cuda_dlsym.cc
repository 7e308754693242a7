// dlsym, interposed. The CUDA runtime, NCCL, Triton and PyTorch find the
// driver with dlopen("libcuda.so.1") + dlsym(handle, "cuGetProcAddress_v2"),
// a lookup that never sees exported symbols of ours; this is where we get in.
// NVTX finds its injection library the same way (nvtx_hooks.h,
// take_injection_lookup).
//
// Hazard: glibc resolves RTLD_NEXT (and the scope of RTLD_DEFAULT) from the
// return address of dlsym's caller. A C wrapper that calls the real dlsym
// makes every such lookup in the process relative to peakscope instead — an
// interposer loaded after us would find itself as "next" and recurse. So on
// x86-64 `dlsym` is a small assembly trampoline: pseudo-handles jump straight
// to glibc's dlsym with the caller's return address intact, and only lookups
// on a real handle (caller-independent) reach the C++ path that may wrap the
// answer. Elsewhere a C fallback does the same with a plain call, which shifts
// RTLD_NEXT / RTLD_DEFAULT lookups to peakscope's position (see docs/cuda.md).
//
// glibc's dlsym is found with dlvsym (GLIBC_2.34, else GLIBC_2.2.5), which we
// do not interpose. dlsym may allocate (dlerror state) through malloc, which
// we do not hook, so no static pool is needed for it.
#include <dlfcn.h>

#include <cstring>

#include "interpose/cuda_hooks.h"
#include "interpose/nvtx_hooks.h"

namespace psc::interpose::cuda {
namespace {

bool is_cuda_name(const char* name) { return name && name[0] == 'c' && name[1] == 'u'; }

}  // namespace
}  // namespace psc::interpose::cuda

using psc::interpose::cuda::DlsymFn;

// Read by the trampoline: glibc's dlsym once resolved.
extern "C" {
__attribute__((visibility("hidden"))) DlsymFn psc_real_dlsym_fn = nullptr;
}

extern "C" __attribute__((visibility("hidden"))) DlsymFn psc_dlsym_resolve() {
  DlsymFn fn = __atomic_load_n(&psc_real_dlsym_fn, __ATOMIC_ACQUIRE);
  if (fn) return fn;
  fn = reinterpret_cast<DlsymFn>(dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34"));
  if (!fn) fn = reinterpret_cast<DlsymFn>(dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.2.5"));
  __atomic_store_n(&psc_real_dlsym_fn, fn, __ATOMIC_RELEASE);
  return fn;
}

// A lookup on a real handle. The answer does not depend on who asks, so the
// call from here is exact; a hooked CUDA name comes back as our wrapper.
extern "C" __attribute__((visibility("hidden"))) void* psc_dlsym_handle(void* handle, const char* name) {
  void* p = psc_dlsym_resolve()(handle, name);
  if (p && name && name[0] == 'I') return psc::interpose::nvtx::take_injection_lookup(handle, name, p);
  if (!p || !psc::interpose::cuda::is_cuda_name(name)) return p;
  if (name[2] == 'd' && name[3] == 'a') return psc::interpose::cuda::wrap_runtime_symbol(name, p);
  return psc::interpose::cuda::wrap_driver_symbol(name, p);
}

#if defined(__x86_64__)
// RTLD_DEFAULT is 0 and RTLD_NEXT is -1 on glibc.
asm(R"(
  .text
  .globl dlsym
  .type dlsym, @function
  .p2align 4
dlsym:
  .cfi_startproc
  testq %rdi, %rdi
  je 1f
  cmpq $-1, %rdi
  je 1f
  jmp psc_dlsym_handle
1:
  movq psc_real_dlsym_fn(%rip), %rax
  testq %rax, %rax
  je 2f
  jmp *%rax
2:
  pushq %rdi
  .cfi_adjust_cfa_offset 8
  pushq %rsi
  .cfi_adjust_cfa_offset 8
  subq $8, %rsp
  .cfi_adjust_cfa_offset 8
  call psc_dlsym_resolve
  addq $8, %rsp
  .cfi_adjust_cfa_offset -8
  popq %rsi
  .cfi_adjust_cfa_offset -8
  popq %rdi
  .cfi_adjust_cfa_offset -8
  jmp *%rax
  .cfi_endproc
  .size dlsym, .-dlsym
)");
#else
PSC_EXPORT void* dlsym(void* handle, const char* name) {
  if (handle == RTLD_DEFAULT || handle == RTLD_NEXT) return psc_dlsym_resolve()(handle, name);
  return psc_dlsym_handle(handle, name);
}
#endif

namespace psc::interpose::cuda {

DlsymFn real_dlsym() { return psc_dlsym_resolve(); }

}  // namespace psc::interpose::cuda
