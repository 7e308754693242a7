// Another interposer, preloaded after peakscope: its cudaMalloc counts calls
// and forwards with dlsym(RTLD_NEXT, "cudaMalloc"), as interposers do. glibc
// answers RTLD_NEXT relative to the caller of dlsym; if peakscope's dlsym
// shifted that to itself, "next" would be this very function and the call
// would recurse forever. Prints which object "next" came from.
#include <dlfcn.h>

#include <cstdio>
#include <cstring>

extern "C" __attribute__((visibility("default"))) int cudaMalloc(void** p, size_t bytes) {
  using Fn = int (*)(void**, size_t);
  static Fn next = nullptr;
  static int depth = 0;
  if (!next) {
    next = reinterpret_cast<Fn>(dlsym(RTLD_NEXT, "cudaMalloc"));
    Dl_info info{};
    const char* object =
        (next && dladdr(reinterpret_cast<void*>(next), &info) && info.dli_fname) ? info.dli_fname : "none";
    const char* slash = strrchr(object, '/');
    std::printf("probe_next %s\n", slash ? slash + 1 : object);
  }
  if (++depth > 1) {
    std::printf("probe_recursed 1\n");
    std::fflush(stdout);
    --depth;
    return 999;
  }
  const int r = next ? next(p, bytes) : 999;
  --depth;
  std::printf("probe_call %zu\n", bytes);
  return r;
}
