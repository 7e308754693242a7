// Small helpers for the CUDA test clients: they run under the recorder against
// the test doubles (or a real GPU) and print "key value" lines the tests read.
#pragma once

#include <dlfcn.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

// Exits with the failing expression when a CUDA call does not succeed.
#define CLIENT_CHECK(call)                                                             \
  do {                                                                                 \
    const int rc_ = static_cast<int>(call);                                            \
    if (rc_ != 0) {                                                                    \
      std::fprintf(stderr, "%s:%d: %s returned %d\n", __FILE__, __LINE__, #call, rc_); \
      std::exit(3);                                                                    \
    }                                                                                  \
  } while (0)

#define CLIENT_EXPECT(cond)                                                    \
  do {                                                                         \
    if (!(cond)) {                                                             \
      std::fprintf(stderr, "%s:%d: expected %s\n", __FILE__, __LINE__, #cond); \
      std::exit(4);                                                            \
    }                                                                          \
  } while (0)

namespace client {

// The recorder's C API when it is preloaded; no-ops otherwise.
inline void range_push(const char* name) {
  static auto fn = reinterpret_cast<void (*)(const char*)>(dlsym(RTLD_DEFAULT, "psc_range_push"));
  if (fn) fn(name);
}
inline void range_pop() {
  static auto fn = reinterpret_cast<void (*)()>(dlsym(RTLD_DEFAULT, "psc_range_pop"));
  if (fn) fn();
}

// "object symbol" of a function pointer: the library it lives in and the
// exported name at exactly that address ("-" for none, "null -" for nullptr).
inline std::string describe(void* fn) {
  if (!fn) return "null -";
  Dl_info info{};
  if (!dladdr(fn, &info) || !info.dli_fname) return "? -";
  std::string object = info.dli_fname;
  object = object.substr(object.find_last_of('/') + 1);
  return object + " " + ((info.dli_sname && info.dli_saddr == fn) ? info.dli_sname : "-");
}

inline void print(const char* key, unsigned long long value) { std::printf("%s %llu\n", key, value); }
inline void print_pointer(const char* key, const void* p) {
  std::printf("%s %llu\n", key, static_cast<unsigned long long>(reinterpret_cast<uintptr_t>(p)));
}

}  // namespace client
