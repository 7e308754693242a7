// A stand-in for another NVTX tool (Nsight Systems): an injection library that
// takes every CORE and CORE2 slot of each instance, hands out its own domain
// and string handles and range ids, checks that every handle it is given is
// one of its own, and at exit writes what it saw to $FAKE_NVTX_TOOL_LOG:
//   inits N / instances N / errors N / checksum H / core.S N / core2.S N /
//   cuda.S N / cudart.S N
// The checksum is a sum of hashes of every message it saw (push, start, mark;
// for resource names, name and handle), so two runs that saw the same calls
// write the same log.
#define NVTX_NO_IMPL
#include <nvtx3/nvToolsExt.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <atomic>
#include <cstdint>

namespace {

constexpr int kSlots = 16;
constexpr int kMaxHandles = 4096;
constexpr uint64_t kFirstId = 1000000;
constexpr uint64_t kMaxIds = 1 << 20;

std::atomic<int> g_inits{0};
std::atomic<const void*> g_instances[64];
std::atomic<uint64_t> g_core[kSlots];
std::atomic<uint64_t> g_core2[kSlots];
std::atomic<uint64_t> g_cuda[kSlots];
std::atomic<uint64_t> g_cudart[kSlots];
std::atomic<uint64_t> g_errors{0};
std::atomic<uint64_t> g_checksum{0};

struct Domain {
  uint64_t hash;
};
struct String {
  uint64_t hash;
};
Domain g_domains[kMaxHandles];
String g_strings[kMaxHandles];
std::atomic<int> g_domain_count{0};
std::atomic<int> g_string_count{0};
std::atomic<uint64_t> g_next_id{0};
std::atomic<bool> g_ended[kMaxIds];
thread_local int t_depth = 0;

uint64_t hash_bytes(const void* data, size_t n, uint64_t h = 1469598103934665603ull) {
  const unsigned char* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}
uint64_t hash_ascii(const char* s) { return s ? hash_bytes(s, strlen(s)) : 1; }
uint64_t hash_wide(const wchar_t* s) { return s ? hash_bytes(s, wcslen(s) * sizeof(wchar_t)) : 1; }

void check_domain(nvtxDomainHandle_t d) {
  auto* p = reinterpret_cast<Domain*>(d);
  if (d && (p < g_domains || p >= g_domains + g_domain_count.load())) ++g_errors;
}

uint64_t domain_hash(nvtxDomainHandle_t d) { return d ? reinterpret_cast<Domain*>(d)->hash : 0; }

uint64_t hash_attributes(const nvtxEventAttributes_t* a) {
  if (!a) return 2;
  switch (a->messageType) {
    case NVTX_MESSAGE_TYPE_ASCII: return hash_ascii(a->message.ascii);
    case NVTX_MESSAGE_TYPE_UNICODE: return hash_wide(a->message.unicode);
    case NVTX_MESSAGE_TYPE_REGISTERED: {
      auto* s = reinterpret_cast<String*>(a->message.registered);
      if (s < g_strings || s >= g_strings + g_string_count.load()) {
        ++g_errors;
        return 3;
      }
      return s->hash;
    }
    default: return 4;
  }
}

void seen(uint64_t h) { g_checksum += h; }

nvtxRangeId_t new_id() { return kFirstId + ++g_next_id; }
void end_id(nvtxRangeId_t id) {
  if (id <= kFirstId || id > kFirstId + g_next_id.load() || id - kFirstId >= kMaxIds ||
      g_ended[id - kFirstId].exchange(true))
    ++g_errors;
}

// ---- CORE ----
void mark_ex(const nvtxEventAttributes_t* a) { ++g_core[1], seen(hash_attributes(a)); }
void mark_a(const char* m) { ++g_core[2], seen(hash_ascii(m)); }
void mark_w(const wchar_t* m) { ++g_core[3], seen(hash_wide(m)); }
nvtxRangeId_t start_ex(const nvtxEventAttributes_t* a) { return ++g_core[4], seen(hash_attributes(a)), new_id(); }
nvtxRangeId_t start_a(const char* m) { return ++g_core[5], seen(hash_ascii(m)), new_id(); }
nvtxRangeId_t start_w(const wchar_t* m) { return ++g_core[6], seen(hash_wide(m)), new_id(); }
void end(nvtxRangeId_t id) { ++g_core[7], end_id(id); }
int push_ex(const nvtxEventAttributes_t* a) { return ++g_core[8], seen(hash_attributes(a)), t_depth++; }
int push_a(const char* m) { return ++g_core[9], seen(hash_ascii(m)), t_depth++; }
int push_w(const wchar_t* m) { return ++g_core[10], seen(hash_wide(m)), t_depth++; }
int pop() { return ++g_core[11], t_depth > 0 ? --t_depth : -1; }
void name_category_a(uint32_t, const char* n) { ++g_core[12], seen(hash_ascii(n)); }
void name_category_w(uint32_t, const wchar_t* n) { ++g_core[13], seen(hash_wide(n)); }
void name_thread_a(uint32_t, const char* n) { ++g_core[14], seen(hash_ascii(n)); }
void name_thread_w(uint32_t, const wchar_t* n) { ++g_core[15], seen(hash_wide(n)); }

// ---- CORE2 ----
void d_mark(nvtxDomainHandle_t d, const nvtxEventAttributes_t* a) {
  ++g_core2[1], check_domain(d), seen(domain_hash(d) ^ hash_attributes(a));
}
nvtxRangeId_t d_start(nvtxDomainHandle_t d, const nvtxEventAttributes_t* a) {
  return ++g_core2[2], check_domain(d), seen(domain_hash(d) ^ hash_attributes(a)), new_id();
}
void d_end(nvtxDomainHandle_t d, nvtxRangeId_t id) { ++g_core2[3], check_domain(d), end_id(id); }
int d_push(nvtxDomainHandle_t d, const nvtxEventAttributes_t* a) {
  return ++g_core2[4], check_domain(d), seen(domain_hash(d) ^ hash_attributes(a)), t_depth++;
}
int d_pop(nvtxDomainHandle_t d) { return ++g_core2[5], check_domain(d), t_depth > 0 ? --t_depth : -1; }
nvtxResourceHandle_t d_resource_create(nvtxDomainHandle_t d, nvtxResourceAttributes_t*) {
  return ++g_core2[6], check_domain(d), nullptr;
}
void d_resource_destroy(nvtxResourceHandle_t) { ++g_core2[7]; }
void d_name_category_a(nvtxDomainHandle_t d, uint32_t, const char* n) {
  ++g_core2[8], check_domain(d), seen(hash_ascii(n));
}
void d_name_category_w(nvtxDomainHandle_t d, uint32_t, const wchar_t* n) {
  ++g_core2[9], check_domain(d), seen(hash_wide(n));
}
nvtxStringHandle_t new_string(uint64_t h) {
  const int i = g_string_count.fetch_add(1);
  if (i >= kMaxHandles) return nullptr;
  g_strings[i].hash = h;
  return reinterpret_cast<nvtxStringHandle_t>(&g_strings[i]);
}
nvtxStringHandle_t d_register_a(nvtxDomainHandle_t d, const char* s) {
  return ++g_core2[10], check_domain(d), new_string(hash_ascii(s));
}
nvtxStringHandle_t d_register_w(nvtxDomainHandle_t d, const wchar_t* s) {
  return ++g_core2[11], check_domain(d), new_string(hash_wide(s));
}
nvtxDomainHandle_t new_domain(uint64_t h) {
  const int i = g_domain_count.fetch_add(1);
  if (i >= kMaxHandles) return nullptr;
  g_domains[i].hash = h * 31;
  return reinterpret_cast<nvtxDomainHandle_t>(&g_domains[i]);
}
nvtxDomainHandle_t d_create_a(const char* n) { return ++g_core2[12], new_domain(hash_ascii(n)); }
nvtxDomainHandle_t d_create_w(const wchar_t* n) { return ++g_core2[13], new_domain(hash_wide(n)); }
void d_destroy(nvtxDomainHandle_t d) { ++g_core2[14], check_domain(d); }
void initialize(const void*) { ++g_core2[15]; }

// ---- CUDA and CUDART resource naming: slot S names a handle ----
uint64_t handle_bits(int device) { return static_cast<uint64_t>(static_cast<int64_t>(device)); }
uint64_t handle_bits(const void* handle) { return reinterpret_cast<uintptr_t>(handle); }
template <std::atomic<uint64_t>* Counts, unsigned Slot, typename Handle>
void name_a(Handle h, const char* n) {
  ++Counts[Slot], seen(hash_ascii(n) ^ handle_bits(h));
}
template <std::atomic<uint64_t>* Counts, unsigned Slot, typename Handle>
void name_w(Handle h, const wchar_t* n) {
  ++Counts[Slot], seen(hash_wide(n) ^ handle_bits(h));
}

template <typename Fn>
void put(NvtxFunctionTable table, unsigned size, unsigned slot, Fn fn) {
  if (slot < size && table[slot])
    *table[slot] = reinterpret_cast<NvtxFunctionPointer>(fn);
  else
    ++g_errors;
}

bool attach(const NvtxExportTableCallbacks* cb) {
  NvtxFunctionTable t = nullptr;
  unsigned n = 0;
  if (!cb->GetModuleFunctionTable(NVTX_CB_MODULE_CORE, &t, &n)) return false;
  put(t, n, 1, mark_ex), put(t, n, 2, mark_a), put(t, n, 3, mark_w), put(t, n, 4, start_ex);
  put(t, n, 5, start_a), put(t, n, 6, start_w), put(t, n, 7, end), put(t, n, 8, push_ex);
  put(t, n, 9, push_a), put(t, n, 10, push_w), put(t, n, 11, pop), put(t, n, 12, name_category_a);
  put(t, n, 13, name_category_w), put(t, n, 14, name_thread_a), put(t, n, 15, name_thread_w);
  if (!cb->GetModuleFunctionTable(NVTX_CB_MODULE_CORE2, &t, &n)) return false;
  put(t, n, 1, d_mark), put(t, n, 2, d_start), put(t, n, 3, d_end), put(t, n, 4, d_push);
  put(t, n, 5, d_pop), put(t, n, 6, d_resource_create), put(t, n, 7, d_resource_destroy);
  put(t, n, 8, d_name_category_a), put(t, n, 9, d_name_category_w), put(t, n, 10, d_register_a);
  put(t, n, 11, d_register_w), put(t, n, 12, d_create_a), put(t, n, 13, d_create_w), put(t, n, 14, d_destroy);
  put(t, n, 15, initialize);
  if (cb->GetModuleFunctionTable(NVTX_CB_MODULE_CUDA, &t, &n)) {
    put(t, n, 1, name_a<g_cuda, 1, nvtx_CUdevice>), put(t, n, 2, name_w<g_cuda, 2, nvtx_CUdevice>);
    put(t, n, 3, name_a<g_cuda, 3, nvtx_CUcontext>), put(t, n, 4, name_w<g_cuda, 4, nvtx_CUcontext>);
    put(t, n, 5, name_a<g_cuda, 5, nvtx_CUstream>), put(t, n, 6, name_w<g_cuda, 6, nvtx_CUstream>);
    put(t, n, 7, name_a<g_cuda, 7, nvtx_CUevent>), put(t, n, 8, name_w<g_cuda, 8, nvtx_CUevent>);
  }
  if (cb->GetModuleFunctionTable(NVTX_CB_MODULE_CUDART, &t, &n)) {
    put(t, n, 1, name_a<g_cudart, 1, int>), put(t, n, 2, name_w<g_cudart, 2, int>);
    put(t, n, 3, name_a<g_cudart, 3, nvtx_cudaStream_t>), put(t, n, 4, name_w<g_cudart, 4, nvtx_cudaStream_t>);
    put(t, n, 5, name_a<g_cudart, 5, nvtx_cudaEvent_t>), put(t, n, 6, name_w<g_cudart, 6, nvtx_cudaEvent_t>);
  }
  return true;
}

__attribute__((destructor)) void write_log() {
  const char* path = getenv("FAKE_NVTX_TOOL_LOG");
  if (!path) return;
  FILE* f = fopen(path, "w");
  if (!f) return;
  int instances = 0;
  for (auto& i : g_instances) instances += i.load() != nullptr;
  fprintf(f, "inits %d\ninstances %d\nerrors %llu\nchecksum %llu\n", g_inits.load(), instances,
          static_cast<unsigned long long>(g_errors.load()), static_cast<unsigned long long>(g_checksum.load()));
  for (int s = 1; s < kSlots; ++s) fprintf(f, "core.%d %llu\n", s, static_cast<unsigned long long>(g_core[s].load()));
  for (int s = 1; s < kSlots; ++s) fprintf(f, "core2.%d %llu\n", s, static_cast<unsigned long long>(g_core2[s].load()));
  for (int s = 1; s <= 8; ++s) fprintf(f, "cuda.%d %llu\n", s, static_cast<unsigned long long>(g_cuda[s].load()));
  for (int s = 1; s <= 6; ++s) fprintf(f, "cudart.%d %llu\n", s, static_cast<unsigned long long>(g_cudart[s].load()));
  fclose(f);
}

}  // namespace

extern "C" __attribute__((visibility("default"))) int InitializeInjectionNvtx2(NvtxGetExportTableFunc_t get) {
  ++g_inits;
  for (auto& slot : g_instances) {
    const void* expected = nullptr;
    if (slot.load() == reinterpret_cast<const void*>(get)) break;
    if (slot.compare_exchange_strong(expected, reinterpret_cast<const void*>(get))) break;
  }
  auto* cb = static_cast<const NvtxExportTableCallbacks*>(get(NVTX_ETID_CALLBACKS));
  auto* version = static_cast<const NvtxExportTableVersionInfo*>(get(NVTX_ETID_VERSIONINFO));
  if (!cb || !version) return 0;
  version->SetInjectionNvtxVersion(NVTX_VERSION);
  return attach(cb) ? 1 : 0;
}
