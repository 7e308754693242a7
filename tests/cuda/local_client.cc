// Opens LIBRARY with RTLD_LOCAL (see local_runtime.cc) and calls it.
//   local_client LIBRARY BYTES
#include <dlfcn.h>

#include <cstdlib>

#include "tests/cuda/client.h"

int main(int argc, char** argv) {
  if (argc != 3) return 2;
  void* handle = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  CLIENT_EXPECT(handle != nullptr);
  auto fn = reinterpret_cast<int (*)(size_t)>(dlsym(handle, "local_alloc_free"));
  CLIENT_EXPECT(fn != nullptr);
  CLIENT_CHECK(fn(static_cast<size_t>(std::atoll(argv[2]))));
  client::print("runtime_in_global_scope", dlsym(RTLD_DEFAULT, "cudaGetDeviceCount") ? 1 : 0);
  return 0;
}
