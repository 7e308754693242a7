// NVTX injection entry points. NVTX (v3, header-only) loads the library named
// by NVTX_INJECTION64_PATH on an instance's first call and hands
// InitializeInjectionNvtx2 that instance's export table; `peakscope record`
// points the variable at the preloaded library itself. Every statically
// linked copy of NVTX (libtorch ships several) is an instance of its own and
// calls us separately, possibly at the same time on different threads.
//
// Chaining: when another tool held NVTX_INJECTION64_PATH (Nsight Systems
// does), `peakscope record` moves its path to PEAKSCOPE_NVTX_CHAIN; when a
// tool takes the variable back inside the program (Nsight's injection proxy
// does, in its constructor), NVTX's dlsym of that tool's entry point comes to
// us (take_injection_lookup) and that tool is the one chained. We load it
// once and initialise it for every instance through a wrapped export table
// (see nvtx_hooks.h), so both see every call; extension modules (payload
// schemas, counters, memory) go to it untouched. Hooked modules: CORE, CORE2
// and the CUDA / CUDART resource-naming modules.
#include <dlfcn.h>
#include <sched.h>

#include <atomic>
#include <cstring>
#include <iterator>
#include <utility>

#include "interpose/cuda_hooks.h"
#include "interpose/nvtx_hooks.h"
#include "runtime/config.h"
#include "runtime/sys.h"

PSC_EXPORT int InitializeInjectionNvtx2(NvtxGetExportTableFunc_t export_table);
PSC_EXPORT int InitializeInjectionNvtxExtension(void* module_info);

namespace psc::interpose::nvtx {
namespace {

using ExtensionInit = int (*)(void* module_info);  // NvtxExtInitializeInjectionFunc_t

struct Instance {
  std::atomic<NvtxGetExportTableFunc_t> export_table;                        // the instance's own; identifies it
  std::atomic<uint32_t> ready;                                               // hooks installed
  NvtxExportTableCallbacks wrapped_callbacks;                                // what the chained tool is given
  const NvtxExportTableCallbacks* callbacks;                                 // the instance's own
  NvtxFunctionPointer* shadow[std::size(kHookedModules)][kShadowSlots + 1];  // per hooked module
};
Instance g_instances[kMaxChainedInstances];

struct Chain {
  NvtxInitializeInjectionNvtxFunc_t init;
  ExtensionInit extension;
  const char* path;
};
Chain g_chain;

enum : uint32_t { kFresh = 0, kStarting = 1, kDone = 2 };
std::atomic<uint32_t> g_setup{kFresh};
std::atomic<pid_t> g_setup_thread{0};
std::atomic<bool> g_warned_overflow{false};
constexpr uint64_t kMaxWaitNs = 5000000000ull;

void say(const char* a, const char* b = "", const char* c = "") {
  if (!rt::g_config.quiet) sys::say(a, b, c);
}

// The entry points of the tool whose InitializeInjectionNvtx2 NVTX looked up
// and was given ours instead (take_injection_lookup); the first one wins.
std::atomic<NvtxInitializeInjectionNvtxFunc_t> g_taken_init{nullptr};
std::atomic<ExtensionInit> g_taken_extension{nullptr};

void* lookup(void* library, const char* name) { return psc::interpose::cuda::real_dlsym()(library, name); }

void load_chain() {
  NvtxInitializeInjectionNvtxFunc_t init = nullptr;
  ExtensionInit extension = nullptr;
  const char* path = getenv("PEAKSCOPE_NVTX_CHAIN");
  if (path && *path) {
    void* library = dlopen(path, RTLD_LAZY);
    if (!library) {
      const char* why = dlerror();
      say("NVTX: cannot load the chained injection library: ", why ? why : path, "; only peakscope sees NVTX");
      return;
    }
    init = reinterpret_cast<NvtxInitializeInjectionNvtxFunc_t>(lookup(library, "InitializeInjectionNvtx2"));
    if (!init) {
      say("NVTX: ", path, " has no InitializeInjectionNvtx2; not chained");
      return;
    }
    extension = reinterpret_cast<ExtensionInit>(lookup(library, "InitializeInjectionNvtxExtension"));
  } else if ((init = g_taken_init.load(std::memory_order_acquire))) {
    extension = g_taken_extension.load(std::memory_order_acquire);
    Dl_info info{};
    path = dladdr(reinterpret_cast<void*>(init), &info) && info.dli_fname ? info.dli_fname : "another NVTX tool";
  } else {
    return;
  }
  if (init == &InitializeInjectionNvtx2) return;  // ourselves under another name
  g_chain.extension = extension;
  g_chain.path = path;
  if (!chained_ids_init()) {
    say("NVTX: no memory for chained range ids; not chained");
    return;
  }
  g_chain.init = init;
  say("NVTX: chained to ", path, " (it sees every NVTX call too)");
}

DomainNaming naming_from_environment() {
  const char* v = getenv("PEAKSCOPE_NVTX_DOMAINS");
  return v && strcmp(v, "plain") == 0 ? DomainNaming::kPlain : DomainNaming::kPrefixed;
}

// Process-wide set-up, once. A thread that finds it in progress waits
// (bounded); the thread doing it may re-enter — the chained tool's
// constructors can make NVTX calls — and then proceeds without waiting.
bool set_up() {
  static bool ok = false;
  uint32_t state = g_setup.load(std::memory_order_acquire);
  if (state == kDone) return ok;
  if (state == kFresh && g_setup.compare_exchange_strong(state, kStarting, std::memory_order_acq_rel)) {
    g_setup_thread.store(sys::gettid(), std::memory_order_relaxed);
    ok = registry_init(naming_from_environment());
    load_chain();
    g_setup.store(kDone, std::memory_order_release);
    return ok;
  }
  if (g_setup_thread.load(std::memory_order_relaxed) == sys::gettid()) return registry_init(naming_from_environment());
  const uint64_t deadline = sys::monotonic_ns() + kMaxWaitNs;
  while (g_setup.load(std::memory_order_acquire) != kDone && sys::monotonic_ns() < deadline) sched_yield();
  return g_setup.load(std::memory_order_acquire) == kDone && ok;
}

// Shows the chained tool a table whose hooked slots point into
// g_chained[index] and whose other slots are the instance's own.
int module_table(int index, NvtxCallbackModule module, NvtxFunctionTable* out_table, unsigned int* out_size) {
  Instance& instance = g_instances[index];
  NvtxFunctionTable real = nullptr;
  unsigned int size = 0;
  if (!instance.callbacks->GetModuleFunctionTable(module, &real, &size)) return 0;
  NvtxFunctionPointer** shadow = nullptr;
  for (size_t m = 0; m < std::size(kHookedModules); ++m) {
    if (kHookedModules[m] == module) shadow = instance.shadow[m];
  }
  NvtxFunctionPointer* mirror = chained_slots(index, module);
  if (shadow && mirror && real) {
    if (size > kShadowSlots) size = kShadowSlots;
    for (unsigned slot = 0; slot < size; ++slot) {
      shadow[slot] = slot > 0 && handles_slot(module, slot) && real[slot] ? &mirror[slot] : real[slot];
    }
    shadow[size] = nullptr;
    real = shadow;
  }
  if (out_table) *out_table = real;
  if (out_size) *out_size = size;
  return 1;
}

template <int I>
int NVTX_API wrapped_module_table(NvtxCallbackModule module, NvtxFunctionTable* out_table, unsigned int* out_size) {
  return module_table(I, module, out_table, out_size);
}

template <int I>
const void* NVTX_API wrapped_export_table(uint32_t id) {
  if (id == NVTX_ETID_CALLBACKS) return &g_instances[I].wrapped_callbacks;
  return g_instances[I].export_table.load(std::memory_order_acquire)(id);
}

struct Wrappers {
  NvtxGetExportTableFunc_t export_table[kMaxChainedInstances];
  decltype(&wrapped_module_table<0>) module_table[kMaxChainedInstances];
};
template <size_t... Is>
constexpr Wrappers make_wrappers(std::index_sequence<Is...>) {
  return {{&wrapped_export_table<static_cast<int>(Is)>...}, {&wrapped_module_table<static_cast<int>(Is)>...}};
}
constexpr Wrappers kWrappers = make_wrappers(std::make_index_sequence<kMaxChainedInstances>());

// The instance's slot (kUnchained when all are taken); *fresh is false when
// this instance was initialised before (a repeated call is idempotent).
int claim_instance(NvtxGetExportTableFunc_t export_table, bool* fresh) {
  *fresh = true;
  for (int i = 0; i < kMaxChainedInstances; ++i) {
    NvtxGetExportTableFunc_t current = g_instances[i].export_table.load(std::memory_order_acquire);
    if (!current && g_instances[i].export_table.compare_exchange_strong(current, export_table)) return i;
    if (current == export_table) {
      *fresh = false;
      return i;
    }
  }
  return kUnchained;
}

void wait_ready(const Instance& instance) {
  const uint64_t deadline = sys::monotonic_ns() + kMaxWaitNs;
  while (!instance.ready.load(std::memory_order_acquire) && sys::monotonic_ns() < deadline) sched_yield();
}

void attach_chain(int index) {
  if (!g_chain.init) return;
  if (index == kUnchained) {
    if (!g_warned_overflow.exchange(true))
      say("NVTX: more than 16 NVTX instances; the chained tool does not see the later ones");
    return;
  }
  Instance& instance = g_instances[index];
  instance.wrapped_callbacks.struct_size = sizeof(NvtxExportTableCallbacks);
  instance.wrapped_callbacks.GetModuleFunctionTable = kWrappers.module_table[index];
  if (!g_chain.init(kWrappers.export_table[index])) {
    // The tool declined this instance: forward nothing to it.
    for (NvtxCallbackModule module : kHookedModules) {
      NvtxFunctionPointer* mirror = chained_slots(index, module);
      for (unsigned slot = 0; slot < kShadowSlots; ++slot) __atomic_store_n(&mirror[slot], nullptr, __ATOMIC_RELEASE);
    }
  }
}

bool install(int index, const NvtxExportTableCallbacks* callbacks) {
  bool any = false;
  for (NvtxCallbackModule module : kHookedModules) {
    NvtxFunctionTable table = nullptr;
    unsigned int size = 0;
    if (!callbacks->GetModuleFunctionTable(module, &table, &size) || !table) continue;
    install_hooks(index, module, table, size);
    any = true;
  }
  return any;
}

void announce_version(NvtxGetExportTableFunc_t export_table) {
  auto* version = static_cast<const NvtxExportTableVersionInfo*>(export_table(NVTX_ETID_VERSIONINFO));
  if (version && version->struct_size >= sizeof(NvtxExportTableVersionInfo) && version->SetInjectionNvtxVersion)
    version->SetInjectionNvtxVersion(NVTX_VERSION);
}

}  // namespace

void* take_injection_lookup(void* handle, const char* name, void* found) {
  const bool main_entry = strcmp(name, "InitializeInjectionNvtx2") == 0;
  if (!main_entry && strcmp(name, "InitializeInjectionNvtxExtension") != 0) return found;
  void* ours = main_entry ? reinterpret_cast<void*>(&InitializeInjectionNvtx2)
                          : reinterpret_cast<void*>(&InitializeInjectionNvtxExtension);
  if (found == ours || rt::g_config.disabled) return found;
  if (!main_entry) {
    // The extension entry of the library whose main entry we took.
    void* main = lookup(handle, "InitializeInjectionNvtx2");
    return main && main == reinterpret_cast<void*>(g_taken_init.load(std::memory_order_acquire)) ? ours : found;
  }
  auto init = reinterpret_cast<NvtxInitializeInjectionNvtxFunc_t>(found);
  NvtxInitializeInjectionNvtxFunc_t expected = nullptr;
  if (g_taken_init.compare_exchange_strong(expected, init, std::memory_order_acq_rel)) {
    g_taken_extension.store(reinterpret_cast<ExtensionInit>(lookup(handle, "InitializeInjectionNvtxExtension")),
                            std::memory_order_release);
  } else if (expected != init) {
    return found;  // a second, different tool: it keeps its own instances
  }
  // Chaining is decided once, at the first instance's set-up; a tool that
  // arrives after it keeps its own instances rather than losing their calls.
  if (g_setup.load(std::memory_order_acquire) == kDone && g_chain.init != init) return found;
  return ours;
}

}  // namespace psc::interpose::nvtx

using namespace psc::interpose::nvtx;
namespace rt = psc::rt;

// Returns 1 when the instance is attached. Returning 0 would make NVTX turn
// every call of this instance into a no-op, so we do that only when nothing
// (neither the recorder nor a chained tool) can use the calls.
PSC_EXPORT int InitializeInjectionNvtx2(NvtxGetExportTableFunc_t export_table) {
  if (!export_table) return 0;
  const bool ready = set_up();
  if (!ready || rt::g_config.disabled) return g_chain.init ? g_chain.init(export_table) : 0;
  auto* callbacks = static_cast<const NvtxExportTableCallbacks*>(export_table(NVTX_ETID_CALLBACKS));
  if (!callbacks || callbacks->struct_size < sizeof(NvtxExportTableCallbacks) || !callbacks->GetModuleFunctionTable)
    return 0;

  bool fresh = false;
  const int index = claim_instance(export_table, &fresh);
  if (!fresh) {
    wait_ready(g_instances[index]);
    return 1;
  }
  if (index != kUnchained) g_instances[index].callbacks = callbacks;
  announce_version(export_table);  // before the tool's init, so that the tool's own announcement stands
  attach_chain(index);
  const bool installed = install(index, callbacks);
  if (index != kUnchained) g_instances[index].ready.store(1, std::memory_order_release);
  return installed ? 1 : 0;
}

// NVTX extensions (payload schemas, counters, memory) look for this symbol in
// the same library. We record none of them; a chained tool gets them all.
PSC_EXPORT int InitializeInjectionNvtxExtension(void* module_info) {
  set_up();
  return g_chain.extension ? g_chain.extension(module_info) : 0;
}
