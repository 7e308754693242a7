// NVTX calls -> recorder events. Push/pop are per thread (the recorder keeps
// one range stack per thread, shared by all domains); start/end are
// process-wide ranges with ids unique across every NVTX instance. Names given
// to CUDA devices, contexts, streams and events (nvToolsExtCuda.h,
// nvToolsExtCudaRt.h) become `nvtx.resource_name` marks.
//
// Cost per call: one name lookup in the recorder's string table (plus a copy
// onto the stack for a domain prefix or a wide message) and one event; with a
// chained tool, one more acquire load and an indirect call.
#include "interpose/nvtx_hooks.h"

#include <cstring>
#include <iterator>
#include <utility>

#include "interpose/payload.h"
#include "runtime/recorder.h"

namespace psc::interpose::nvtx {

ChainedSlots g_chained[kMaxChainedInstances + 1];

namespace {

// Nesting depth returned by push/pop when no tool is chained. NVTX keeps one
// per domain; ours is per thread across domains, like the recorder's stack.
__thread int t_depth;

int push(const char* name) {
  rt::record_range_push(name, Api::kNvtx);
  return t_depth++;
}

int pop() {
  rt::record_range_pop(Api::kNvtx);
  return t_depth > 0 ? --t_depth : -1;
}

void mark(MarkText text) { rt::record_mark(text.name, text.payload, Api::kNvtx); }

nvtxRangeId_t start(const char* name) {
  const uint64_t id = next_range_id();
  rt::record_range_start(id, name, Api::kNvtx);
  return id;
}

nvtxDomainHandle_t create_domain(const char* name, nvtxDomainHandle_t theirs, bool chained) {
  const char* prefix = store_text(name ? name : "(unnamed domain)", "::");
  // A chained tool's handle is the one the application gets: calls that reach
  // the tool without us (extensions, resources) must carry its own handles.
  nvtxDomainHandle_t handle = chained ? theirs : reinterpret_cast<nvtxDomainHandle_t>(const_cast<char*>(prefix));
  if (handle && prefix) domain_insert(handle, prefix);
  return handle;
}

nvtxStringHandle_t register_string(nvtxDomainHandle_t domain, const char* text, nvtxStringHandle_t theirs,
                                   bool chained) {
  const char* stored = store_text(domain_prefix(domain), text ? text : "");
  nvtxStringHandle_t handle = chained ? theirs : reinterpret_cast<nvtxStringHandle_t>(const_cast<char*>(stored));
  if (handle && stored) string_insert(handle, stored);
  return handle;
}

// ---- resource naming (modules CUDA and CUDART) ----
constexpr const char* kResourceNameMark = "nvtx.resource_name";
// Room for kind, api, handle and a name of kMaxName bytes with a little
// escaping; a name that needs more is cut at a character boundary.
constexpr size_t kResourcePayloadBytes = kMaxName + 192;

struct ResourceHandle {
  uint64_t value;
  bool ordinal;  // a device ordinal (signed), not a pointer
};
ResourceHandle handle_of(int device) { return {static_cast<uint64_t>(static_cast<int64_t>(device)), true}; }
ResourceHandle handle_of(const void* handle) { return {reinterpret_cast<uintptr_t>(handle), false}; }

const char* utf8_of(const char* name, NameBuffer&) { return name; }
const char* utf8_of(const wchar_t* name, NameBuffer& converted) {
  if (!name) return nullptr;
  wide_to_utf8(name, converted);
  return converted.text;
}

// Both modules keep each kind's A and W variants side by side from slot 1 on,
// so (slot - 1) / 2 is the kind.
void record_resource_name(NvtxCallbackModule module, unsigned slot, ResourceHandle handle, const char* name) {
  static constexpr const char* kCudaKinds[] = {"device", "context", "stream", "event"};
  static constexpr const char* kCudartKinds[] = {"device", "stream", "event"};
  const bool driver = module == NVTX_CB_MODULE_CUDA;
  const unsigned kind = (slot - 1) / 2;
  if (slot == 0 || kind >= (driver ? std::size(kCudaKinds) : std::size(kCudartKinds))) return;
  JsonPayload<kResourcePayloadBytes> payload;
  payload.text("kind", driver ? kCudaKinds[kind] : kCudartKinds[kind]).text("api", driver ? "cuda" : "cudart");
  if (handle.ordinal) {
    payload.signed_number("handle", static_cast<int64_t>(handle.value));
  } else {
    payload.number("handle", handle.value);
  }
  payload.text("name", name);  // null stays null
  rt::record_mark(kResourceNameMark, payload.str(), Api::kNvtx);
}

template <int I>
struct Hooks {
  template <typename Fn>
  static Fn next_core(unsigned slot) {
    return reinterpret_cast<Fn>(__atomic_load_n(&g_chained[I].core[slot], __ATOMIC_ACQUIRE));
  }
  template <typename Fn>
  static Fn next_core2(unsigned slot) {
    return reinterpret_cast<Fn>(__atomic_load_n(&g_chained[I].core2[slot], __ATOMIC_ACQUIRE));
  }

  // ---- default domain (module CORE) ----
  static void mark_ex(const nvtxEventAttributes_t* a) {
    MarkBuffers buffers;
    mark(mark_text("", a, buffers));
    if (auto next = next_core<nvtxMarkEx_impl_fntype>(NVTX_CBID_CORE_MarkEx)) next(a);
  }
  static void mark_a(const char* message) {
    MarkBuffers buffers;
    mark(mark_text("", message, buffers));
    if (auto next = next_core<nvtxMarkA_impl_fntype>(NVTX_CBID_CORE_MarkA)) next(message);
  }
  static void mark_w(const wchar_t* message) {
    MarkBuffers buffers;
    wide_to_utf8(message, buffers.message);
    mark(mark_text("", message ? buffers.message.text : nullptr, buffers));
    if (auto next = next_core<nvtxMarkW_impl_fntype>(NVTX_CBID_CORE_MarkW)) next(message);
  }
  static nvtxRangeId_t start_ex(const nvtxEventAttributes_t* a) {
    NameBuffer buffer;
    const nvtxRangeId_t id = start(attributes_name("", a, buffer));
    if (auto next = next_core<nvtxRangeStartEx_impl_fntype>(NVTX_CBID_CORE_RangeStartEx)) {
      chained_id_remember(id, next(a));
    }
    return id;
  }
  static nvtxRangeId_t start_a(const char* message) {
    NameBuffer buffer;
    const nvtxRangeId_t id = start(ascii_name("", message, buffer));
    if (auto next = next_core<nvtxRangeStartA_impl_fntype>(NVTX_CBID_CORE_RangeStartA)) {
      chained_id_remember(id, next(message));
    }
    return id;
  }
  static nvtxRangeId_t start_w(const wchar_t* message) {
    NameBuffer buffer;
    const nvtxRangeId_t id = start(wide_name("", message, buffer));
    if (auto next = next_core<nvtxRangeStartW_impl_fntype>(NVTX_CBID_CORE_RangeStartW)) {
      chained_id_remember(id, next(message));
    }
    return id;
  }
  static void end(nvtxRangeId_t id) {
    rt::record_range_end(id, Api::kNvtx);
    uint64_t theirs;
    if (auto next = next_core<nvtxRangeEnd_impl_fntype>(NVTX_CBID_CORE_RangeEnd)) {
      if (chained_id_lookup(id, &theirs)) next(theirs);
    }
  }
  static int push_ex(const nvtxEventAttributes_t* a) {
    NameBuffer buffer;
    const int depth = push(attributes_name("", a, buffer));
    if (auto next = next_core<nvtxRangePushEx_impl_fntype>(NVTX_CBID_CORE_RangePushEx)) return next(a);
    return depth;
  }
  static int push_a(const char* message) {
    NameBuffer buffer;
    const int depth = push(ascii_name("", message, buffer));
    if (auto next = next_core<nvtxRangePushA_impl_fntype>(NVTX_CBID_CORE_RangePushA)) return next(message);
    return depth;
  }
  static int push_w(const wchar_t* message) {
    NameBuffer buffer;
    const int depth = push(wide_name("", message, buffer));
    if (auto next = next_core<nvtxRangePushW_impl_fntype>(NVTX_CBID_CORE_RangePushW)) return next(message);
    return depth;
  }
  static int range_pop() {
    const int depth = pop();
    if (auto next = next_core<nvtxRangePop_impl_fntype>(NVTX_CBID_CORE_RangePop)) return next();
    return depth;
  }

  // ---- domains (module CORE2) ----
  static void domain_mark_ex(nvtxDomainHandle_t domain, const nvtxEventAttributes_t* a) {
    MarkBuffers buffers;
    mark(mark_text(domain_prefix(domain), a, buffers));
    if (auto next = next_core2<nvtxDomainMarkEx_impl_fntype>(NVTX_CBID_CORE2_DomainMarkEx)) next(domain, a);
  }
  static nvtxRangeId_t domain_start_ex(nvtxDomainHandle_t domain, const nvtxEventAttributes_t* a) {
    NameBuffer buffer;
    const nvtxRangeId_t id = start(attributes_name(domain_prefix(domain), a, buffer));
    if (auto next = next_core2<nvtxDomainRangeStartEx_impl_fntype>(NVTX_CBID_CORE2_DomainRangeStartEx)) {
      chained_id_remember(id, next(domain, a));
    }
    return id;
  }
  static void domain_end(nvtxDomainHandle_t domain, nvtxRangeId_t id) {
    rt::record_range_end(id, Api::kNvtx);
    uint64_t theirs;
    if (auto next = next_core2<nvtxDomainRangeEnd_impl_fntype>(NVTX_CBID_CORE2_DomainRangeEnd)) {
      if (chained_id_lookup(id, &theirs)) next(domain, theirs);
    }
  }
  static int domain_push_ex(nvtxDomainHandle_t domain, const nvtxEventAttributes_t* a) {
    NameBuffer buffer;
    const int depth = push(attributes_name(domain_prefix(domain), a, buffer));
    if (auto next = next_core2<nvtxDomainRangePushEx_impl_fntype>(NVTX_CBID_CORE2_DomainRangePushEx)) {
      return next(domain, a);
    }
    return depth;
  }
  static int domain_pop(nvtxDomainHandle_t domain) {
    const int depth = pop();
    if (auto next = next_core2<nvtxDomainRangePop_impl_fntype>(NVTX_CBID_CORE2_DomainRangePop)) return next(domain);
    return depth;
  }
  static nvtxStringHandle_t register_a(nvtxDomainHandle_t domain, const char* text) {
    auto next = next_core2<nvtxDomainRegisterStringA_impl_fntype>(NVTX_CBID_CORE2_DomainRegisterStringA);
    return register_string(domain, text, next ? next(domain, text) : nullptr, next != nullptr);
  }
  static nvtxStringHandle_t register_w(nvtxDomainHandle_t domain, const wchar_t* text) {
    auto next = next_core2<nvtxDomainRegisterStringW_impl_fntype>(NVTX_CBID_CORE2_DomainRegisterStringW);
    NameBuffer converted;
    wide_to_utf8(text, converted);
    return register_string(domain, converted.text, next ? next(domain, text) : nullptr, next != nullptr);
  }
  static nvtxDomainHandle_t domain_create_a(const char* name) {
    auto next = next_core2<nvtxDomainCreateA_impl_fntype>(NVTX_CBID_CORE2_DomainCreateA);
    return create_domain(name, next ? next(name) : nullptr, next != nullptr);
  }
  static nvtxDomainHandle_t domain_create_w(const wchar_t* name) {
    auto next = next_core2<nvtxDomainCreateW_impl_fntype>(NVTX_CBID_CORE2_DomainCreateW);
    NameBuffer converted;
    wide_to_utf8(name, converted);
    return create_domain(name ? converted.text : nullptr, next ? next(name) : nullptr, next != nullptr);
  }

  // ---- resource naming (modules CUDA and CUDART): one hook per slot ----
  template <NvtxCallbackModule M, unsigned Slot, typename Handle, typename Char>
  static void name_resource(Handle handle, const Char* name) {
    NameBuffer converted;
    record_resource_name(M, Slot, handle_of(handle), utf8_of(name, converted));
    using Next = void (*)(Handle, const Char*);
    if (auto next = reinterpret_cast<Next>(__atomic_load_n(&chained_slots(I, M)[Slot], __ATOMIC_ACQUIRE))) {
      next(handle, name);
    }
  }
};

struct HookSet {
  NvtxFunctionPointer core[kShadowSlots];
  NvtxFunctionPointer core2[kShadowSlots];
  NvtxFunctionPointer cuda[kShadowSlots];
  NvtxFunctionPointer cudart[kShadowSlots];
};

template <typename Fn>
NvtxFunctionPointer erase(Fn fn) {
  return reinterpret_cast<NvtxFunctionPointer>(fn);
}

template <int I, NvtxCallbackModule M, unsigned Slot, typename Handle, typename Char>
void name_slot(NvtxFunctionPointer* hooks) {
  hooks[Slot] = erase(&Hooks<I>::template name_resource<M, Slot, Handle, Char>);
}

template <int I>
void fill_naming(HookSet& s) {
  constexpr NvtxCallbackModule kCu = NVTX_CB_MODULE_CUDA, kRt = NVTX_CB_MODULE_CUDART;
  name_slot<I, kCu, NVTX_CBID_CUDA_NameCuDeviceA, nvtx_CUdevice, char>(s.cuda);
  name_slot<I, kCu, NVTX_CBID_CUDA_NameCuDeviceW, nvtx_CUdevice, wchar_t>(s.cuda);
  name_slot<I, kCu, NVTX_CBID_CUDA_NameCuContextA, nvtx_CUcontext, char>(s.cuda);
  name_slot<I, kCu, NVTX_CBID_CUDA_NameCuContextW, nvtx_CUcontext, wchar_t>(s.cuda);
  name_slot<I, kCu, NVTX_CBID_CUDA_NameCuStreamA, nvtx_CUstream, char>(s.cuda);
  name_slot<I, kCu, NVTX_CBID_CUDA_NameCuStreamW, nvtx_CUstream, wchar_t>(s.cuda);
  name_slot<I, kCu, NVTX_CBID_CUDA_NameCuEventA, nvtx_CUevent, char>(s.cuda);
  name_slot<I, kCu, NVTX_CBID_CUDA_NameCuEventW, nvtx_CUevent, wchar_t>(s.cuda);
  name_slot<I, kRt, NVTX_CBID_CUDART_NameCudaDeviceA, int, char>(s.cudart);
  name_slot<I, kRt, NVTX_CBID_CUDART_NameCudaDeviceW, int, wchar_t>(s.cudart);
  name_slot<I, kRt, NVTX_CBID_CUDART_NameCudaStreamA, nvtx_cudaStream_t, char>(s.cudart);
  name_slot<I, kRt, NVTX_CBID_CUDART_NameCudaStreamW, nvtx_cudaStream_t, wchar_t>(s.cudart);
  name_slot<I, kRt, NVTX_CBID_CUDART_NameCudaEventA, nvtx_cudaEvent_t, char>(s.cudart);
  name_slot<I, kRt, NVTX_CBID_CUDART_NameCudaEventW, nvtx_cudaEvent_t, wchar_t>(s.cudart);
}

template <int I>
void fill(HookSet& s) {
  using H = Hooks<I>;
  s.core[NVTX_CBID_CORE_MarkEx] = erase(&H::mark_ex);
  s.core[NVTX_CBID_CORE_MarkA] = erase(&H::mark_a);
  s.core[NVTX_CBID_CORE_MarkW] = erase(&H::mark_w);
  s.core[NVTX_CBID_CORE_RangeStartEx] = erase(&H::start_ex);
  s.core[NVTX_CBID_CORE_RangeStartA] = erase(&H::start_a);
  s.core[NVTX_CBID_CORE_RangeStartW] = erase(&H::start_w);
  s.core[NVTX_CBID_CORE_RangeEnd] = erase(&H::end);
  s.core[NVTX_CBID_CORE_RangePushEx] = erase(&H::push_ex);
  s.core[NVTX_CBID_CORE_RangePushA] = erase(&H::push_a);
  s.core[NVTX_CBID_CORE_RangePushW] = erase(&H::push_w);
  s.core[NVTX_CBID_CORE_RangePop] = erase(&H::range_pop);
  s.core2[NVTX_CBID_CORE2_DomainMarkEx] = erase(&H::domain_mark_ex);
  s.core2[NVTX_CBID_CORE2_DomainRangeStartEx] = erase(&H::domain_start_ex);
  s.core2[NVTX_CBID_CORE2_DomainRangeEnd] = erase(&H::domain_end);
  s.core2[NVTX_CBID_CORE2_DomainRangePushEx] = erase(&H::domain_push_ex);
  s.core2[NVTX_CBID_CORE2_DomainRangePop] = erase(&H::domain_pop);
  s.core2[NVTX_CBID_CORE2_DomainRegisterStringA] = erase(&H::register_a);
  s.core2[NVTX_CBID_CORE2_DomainRegisterStringW] = erase(&H::register_w);
  s.core2[NVTX_CBID_CORE2_DomainCreateA] = erase(&H::domain_create_a);
  s.core2[NVTX_CBID_CORE2_DomainCreateW] = erase(&H::domain_create_w);
  fill_naming<I>(s);
  // Not hooked (a chained tool still gets them): category and OS-thread names,
  // resources, domain destroy, nvtxInitialize, and the OpenCL/sync modules.
}

using Filler = void (*)(HookSet&);
template <size_t... Is>
constexpr auto make_fillers(std::index_sequence<Is...>) {
  struct Table {
    Filler fill[sizeof...(Is)];
  };
  return Table{{&fill<static_cast<int>(Is)>...}};
}
constexpr auto kFillers = make_fillers(std::make_index_sequence<kMaxChainedInstances + 1>());

}  // namespace

bool handles_slot(NvtxCallbackModule module, unsigned slot) {
  if (module == NVTX_CB_MODULE_CORE) return slot >= NVTX_CBID_CORE_MarkEx && slot <= NVTX_CBID_CORE_RangePop;
  if (module == NVTX_CB_MODULE_CUDA) return slot >= NVTX_CBID_CUDA_NameCuDeviceA && slot <= NVTX_CBID_CUDA_NameCuEventW;
  if (module == NVTX_CB_MODULE_CUDART) {
    return slot >= NVTX_CBID_CUDART_NameCudaDeviceA && slot <= NVTX_CBID_CUDART_NameCudaEventW;
  }
  if (module != NVTX_CB_MODULE_CORE2) return false;
  return (slot >= NVTX_CBID_CORE2_DomainMarkEx && slot <= NVTX_CBID_CORE2_DomainRangePop) ||
         (slot >= NVTX_CBID_CORE2_DomainRegisterStringA && slot <= NVTX_CBID_CORE2_DomainCreateW);
}

void install_hooks(int index, NvtxCallbackModule module, NvtxFunctionTable table, unsigned size) {
  if (!table || index < 0 || index > kUnchained) return;
  HookSet set{};
  kFillers.fill[index](set);
  const NvtxFunctionPointer* hooks = module == NVTX_CB_MODULE_CORE    ? set.core
                                     : module == NVTX_CB_MODULE_CORE2 ? set.core2
                                     : module == NVTX_CB_MODULE_CUDA  ? set.cuda
                                                                      : set.cudart;
  for (unsigned slot = 1; slot < size && slot < kShadowSlots; ++slot) {
    if (!handles_slot(module, slot) || !table[slot]) continue;
    __atomic_store_n(table[slot], hooks[slot], __ATOMIC_RELEASE);
  }
}

}  // namespace psc::interpose::nvtx
