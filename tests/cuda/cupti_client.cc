// A CUDA runtime program that scripts the CUPTI double (tests/fakes/fake_cupti.h)
// while it runs under the recorder, and prints what the tests need to check
// the trace against ("key value" lines).
//
//   cupti_client script   resource callbacks, MEMORY2 / pool / kernel records
//                         delivered on CUPTI's thread, at psc_flush and at exit;
//                         hooked allocations; device samples at wave and layer
//                         boundaries with memory no allocation accounts for
//   cupti_client basic    an allocation, a wave and a layer, one scripted
//                         MEMORY2 record if a CUPTI double is there
//   cupti_client quick_exit  a scripted record left in CUPTI, then _exit(0)
//
// The double is found with dlopen(RTLD_NOLOAD): the recorder opens it
// RTLD_LOCAL, and where no double is loaded the client runs without it.
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <time.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <string>

#include "tests/cuda/client.h"
#include "tests/fakes/fake_cupti.h"

namespace {

struct Cupti {
  void (*memory)(const FakeCuptiMemory*) = nullptr;
  void (*pool)(const FakeCuptiPool*) = nullptr;
  void (*kernel)(const FakeCuptiKernel*) = nullptr;
  void (*context)(int, void*, uint32_t) = nullptr;
  void (*stream)(int, void*, void*) = nullptr;
  void (*module)(int, void*, uint32_t, size_t) = nullptr;
  void (*deliver)(int) = nullptr;
  uint32_t (*context_id)(void*) = nullptr;
  uint32_t (*stream_id)(void*, void*) = nullptr;
  long long (*count)(const char*) = nullptr;
  bool loaded() const { return memory != nullptr; }
};

template <typename Fn>
void find(void* library, Fn* out, const char* name) {
  *out = reinterpret_cast<Fn>(dlsym(library, name));
}

Cupti find_double() {
  Cupti c;
  void* library = dlopen("libcupti.so.13", RTLD_NOLOAD | RTLD_NOW);
  if (!library) return c;
  find(library, &c.memory, "fake_cupti_memory");
  find(library, &c.pool, "fake_cupti_pool");
  find(library, &c.kernel, "fake_cupti_kernel");
  find(library, &c.context, "fake_cupti_context");
  find(library, &c.stream, "fake_cupti_stream");
  find(library, &c.module, "fake_cupti_module");
  find(library, &c.deliver, "fake_cupti_deliver");
  find(library, &c.context_id, "fake_cupti_context_id");
  find(library, &c.stream_id, "fake_cupti_stream_id");
  find(library, &c.count, "fake_cupti_count");
  return c;
}

uint64_t now_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec);
}

void psc_flush() {
  static auto fn = reinterpret_cast<void (*)()>(dlsym(RTLD_DEFAULT, "psc_flush"));
  if (fn) fn();
}

void* current_context() {
  void* driver = dlopen("libcuda.so.1", RTLD_NOLOAD | RTLD_NOW);
  CLIENT_EXPECT(driver != nullptr);
  auto get = reinterpret_cast<CUresult (*)(CUcontext*)>(dlsym(driver, "cuCtxGetCurrent"));
  CUcontext ctx = nullptr;
  CLIENT_CHECK(get(&ctx));
  return ctx;
}

void set_hidden_bytes(int device, uint64_t bytes) {
  void* driver = dlopen("libcuda.so.1", RTLD_NOLOAD | RTLD_NOW);
  auto set = reinterpret_cast<void (*)(int, uint64_t)>(dlsym(driver, "fake_cuda_set_hidden_bytes"));
  CLIENT_EXPECT(set != nullptr);
  set(device, bytes);
}

uint64_t used_bytes() {
  size_t free_bytes = 0, total = 0;
  CLIENT_CHECK(cudaMemGetInfo(&free_bytes, &total));
  return total - free_bytes;
}

FakeCuptiMemory memory_record(uint64_t address, uint64_t bytes, uint64_t timestamp, const char* source) {
  FakeCuptiMemory m{};
  m.memory_kind = 3;  // CUPTI_ACTIVITY_MEMORY_KIND_DEVICE
  m.address = address;
  m.bytes = bytes;
  m.timestamp = timestamp;
  m.context_id = 1;
  m.stream_id = 0xffffffffu;
  m.source = source;
  return m;
}

FakeCuptiKernel kernel_record(const char* name, uint64_t start, uint32_t stream_id) {
  FakeCuptiKernel k{};
  k.name = name;
  k.start = start;
  k.end = start + 2000;
  k.context_id = 1;
  k.stream_id = stream_id;
  k.local_memory_bytes = 65536;
  return k;
}

constexpr uint64_t kHooked = (3u << 20) + 1;
constexpr uint64_t kCublas = 32u << 20;
constexpr uint64_t kCublasAddress = 0x7a0000000000ull;
constexpr uint64_t kNccl = 4u << 20;
constexpr uint64_t kNcclAddress = 0x7a0010000000ull;
constexpr uint64_t kPoolAddress = 0x6a00ull;
constexpr uint64_t kManaged = 6u << 20;
constexpr uint64_t kManagedAddress = 0x7a0020000000ull;
constexpr uint64_t kPinned = 1u << 20;
constexpr uint64_t kPinnedAddress = 0x7f1000000000ull;
constexpr uint64_t kStamped = 5u << 20;
constexpr uint64_t kStampedAddress = 0x7a0030000000ull;
constexpr uint64_t kAtExit = 7u << 20;
constexpr uint64_t kAtExitAddress = 0x7a0040000000ull;
constexpr uint64_t kLayerAlloc = 1u << 20;
constexpr uint64_t kHidden = 300u << 20;

int script() {
  CLIENT_CHECK(cudaSetDevice(0));  // cuInit: the recorder's backend loads CUPTI and subscribes here
  const Cupti cupti = find_double();
  CLIENT_EXPECT(cupti.loaded());
  void* ctx = current_context();
  cupti.context(1, ctx, 0);
  cudaStream_t stream;
  CLIENT_CHECK(cudaStreamCreate(&stream));
  cupti.stream(1, ctx, stream);
  cupti.module(1, ctx, 7, 123456);
  const uint32_t stream_id = cupti.stream_id(ctx, stream);
  client::print("context", reinterpret_cast<uintptr_t>(ctx));
  client::print("context_id", cupti.context_id(ctx));
  client::print("stream", reinterpret_cast<uintptr_t>(stream));
  client::print("stream_id", stream_id);

  // A hooked allocation CUPTI reports too (the analysis counts it once).
  void* hooked;
  CLIENT_CHECK(cudaMalloc(&hooked, kHooked));
  const uint64_t t_hooked = now_ns();
  const FakeCuptiMemory twin =
      memory_record(reinterpret_cast<uint64_t>(hooked), kHooked, t_hooked, "/usr/lib/libtorch_cuda.so");
  cupti.memory(&twin);
  client::print_pointer("hooked", hooked);
  client::print("t_hooked", t_hooked);

  // Allocations only CUPTI sees, from libraries that never call the hooks.
  const uint64_t t_cublas = now_ns() - 5000000;  // CUPTI's time, earlier than we learn it
  FakeCuptiMemory cublas = memory_record(kCublasAddress, kCublas, t_cublas, "/opt/nvidia/lib/libcublas.so.13");
  cublas.stream_id = stream_id;
  cupti.memory(&cublas);
  FakeCuptiMemory nccl = memory_record(kNcclAddress, kNccl, t_cublas + 1000, "libnccl.so.2");
  nccl.pool_type = 1;  // CUPTI_ACTIVITY_MEMORY_POOL_TYPE_LOCAL
  nccl.pool_address = kPoolAddress;
  cupti.memory(&nccl);
  FakeCuptiMemory managed = memory_record(kManagedAddress, kManaged, t_cublas + 2000, nullptr);
  managed.memory_kind = 5;  // MANAGED
  cupti.memory(&managed);
  FakeCuptiMemory pinned = memory_record(kPinnedAddress, kPinned, t_cublas + 3000, "libcudnn.so.9");
  pinned.memory_kind = 2;  // PINNED
  pinned.device = 0;
  cupti.memory(&pinned);
  client::print("t_cublas", t_cublas);

  // No time given: CUPTI asks the registered timestamp callback.
  const uint64_t before_stamped = now_ns();
  FakeCuptiMemory stamped = memory_record(kStampedAddress, kStamped, 0, "libcublasLt.so.13");
  cupti.memory(&stamped);
  client::print("before_stamped", before_stamped);
  client::print("after_stamped", now_ns());

  FakeCuptiPool pool{};
  pool.operation = 1;  // CREATED
  pool.address = kPoolAddress;
  pool.size = 64u << 20;
  pool.utilized = kNccl;
  pool.timestamp = t_cublas + 500;
  cupti.pool(&pool);

  // Kernel A twice, B once: one first-execution mark each.
  const uint64_t t_kernel = now_ns() - 1000000;
  FakeCuptiKernel a1 = kernel_record("_Z7kernelAPf", t_kernel, stream_id);
  FakeCuptiKernel b1 = kernel_record("_Z7kernelBPf", t_kernel + 10000, stream_id);
  FakeCuptiKernel a2 = kernel_record("_Z7kernelAPf", t_kernel + 20000, stream_id);
  cupti.kernel(&a1);
  cupti.kernel(&b1);
  cupti.kernel(&a2);
  client::print("t_kernel", t_kernel);

  // Half on CUPTI's own thread now; the rest at psc_flush.
  cupti.deliver(1);
  FakeCuptiMemory cublas_free =
      memory_record(kCublasAddress, kCublas, t_kernel + 30000, "/opt/nvidia/lib/libcublas.so.13");
  cublas_free.release = 1;
  cupti.memory(&cublas_free);
  FakeCuptiKernel a3 = kernel_record("_Z7kernelAPf", t_kernel + 40000, stream_id);
  cupti.kernel(&a3);
  client::print("t_cublas_free", t_kernel + 30000);

  // Device samples at wave and layer boundaries: what no allocation accounts for.
  set_hidden_bytes(0, kHidden);
  client::range_push("wave");
  client::print("used_wave_push", used_bytes());
  client::range_push("forward/layer.0");
  void* layer;
  CLIENT_CHECK(cudaMalloc(&layer, kLayerAlloc));
  client::print("used_layer_push", used_bytes() - kLayerAlloc);
  client::range_push("not_a_boundary");
  client::range_pop();
  client::print("used_layer_pop", used_bytes());
  client::range_pop();
  CLIENT_CHECK(cudaFree(layer));
  client::print("used_wave_pop", used_bytes());
  client::range_pop();

  psc_flush();
  client::print("pending_after_flush", static_cast<unsigned long long>(cupti.count("pending")));

  // Left in CUPTI's buffers at exit: the recorder's atexit flush hands it over.
  FakeCuptiMemory at_exit = memory_record(kAtExitAddress, kAtExit, now_ns(), "libexit.so");
  cupti.memory(&at_exit);
  FakeCuptiKernel c1 = kernel_record("_Z7kernelCPf", now_ns(), stream_id);
  cupti.kernel(&c1);
  client::print("pending_at_exit", static_cast<unsigned long long>(cupti.count("pending")));
  CLIENT_CHECK(cudaFree(hooked));
  CLIENT_CHECK(cudaStreamDestroy(stream));
  return 0;
}

int basic() {
  CLIENT_CHECK(cudaSetDevice(0));
  const Cupti cupti = find_double();
  client::print("cupti_loaded", cupti.loaded());
  void* hooked;
  CLIENT_CHECK(cudaMalloc(&hooked, kHooked));
  client::print_pointer("hooked", hooked);
  if (cupti.loaded()) {
    const uint64_t before = now_ns();
    FakeCuptiMemory m = memory_record(kCublasAddress, kCublas, 0, "/opt/nvidia/lib/libcublas.so.13");
    cupti.memory(&m);
    client::print("before_stamped", before);
  }
  set_hidden_bytes(0, kHidden);
  client::range_push("wave");
  client::print("used_wave_push", used_bytes());
  client::range_push("backward/layer.3");
  client::range_pop();
  client::range_pop();
  psc_flush();
  if (cupti.loaded()) client::print("after_stamped", now_ns());
  CLIENT_CHECK(cudaFree(hooked));
  return 0;
}

int quick_exit_scenario() {
  CLIENT_CHECK(cudaSetDevice(0));
  const Cupti cupti = find_double();
  CLIENT_EXPECT(cupti.loaded());
  FakeCuptiMemory m = memory_record(kAtExitAddress, kAtExit, now_ns(), "libexit.so");
  cupti.memory(&m);
  client::print("pending", static_cast<unsigned long long>(cupti.count("pending")));
  std::fflush(stdout);
  _exit(0);  // no atexit handler, no destructor: the recorder's _exit flushes CUPTI
}

}  // namespace

int main(int argc, char** argv) {
  const std::string scenario = argc > 1 ? argv[1] : "";
  if (scenario == "script") return script();
  if (scenario == "basic") return basic();
  if (scenario == "quick_exit") return quick_exit_scenario();
  std::fprintf(stderr, "usage: cupti_client script|basic\n");
  return 2;
}
