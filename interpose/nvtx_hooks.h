// The functions peakscope writes into an NVTX instance's function tables, and
// the storage through which a chained tool (PEAKSCOPE_NVTX_CHAIN) sees the
// same calls.
//
// A chained tool initialises each NVTX instance through us (nvtx_inject.cc).
// For the slots we handle it is shown a shadow table whose entries point into
// g_chained[instance]; our hook for that instance records, then calls what the
// tool wrote there. Slots we do not handle it writes straight into the real
// table. Hooks are therefore generated per instance (a function pointer in an
// NVTX table carries no context): instances 0..kMaxChainedInstances-1 each
// get their own set; later instances share the set kUnchained, which never
// forwards.
#pragma once

#include "interpose/nvtx_names.h"

namespace psc::interpose::nvtx {

constexpr int kMaxChainedInstances = 16;
constexpr int kUnchained = kMaxChainedInstances;
// Slots per module we mirror for a chained tool (NVTX 3 defines 16 in CORE
// and CORE2, 9 in CUDA, 7 in CUDART; index 0 unused).
constexpr unsigned kShadowSlots = 32;

// What the chained tool wrote for each slot we hook, per module we hook.
struct ChainedSlots {
  NvtxFunctionPointer core[kShadowSlots];
  NvtxFunctionPointer core2[kShadowSlots];
  NvtxFunctionPointer cuda[kShadowSlots];    // resource naming, driver API (nvToolsExtCuda.h)
  NvtxFunctionPointer cudart[kShadowSlots];  // resource naming, runtime API (nvToolsExtCudaRt.h)
};
extern ChainedSlots g_chained[kMaxChainedInstances + 1];

// The modules whose tables peakscope hooks, in the order it installs them.
constexpr NvtxCallbackModule kHookedModules[] = {NVTX_CB_MODULE_CORE, NVTX_CB_MODULE_CORE2, NVTX_CB_MODULE_CUDA,
                                                 NVTX_CB_MODULE_CUDART};

// Instance `index`'s mirror of `module` (kShadowSlots entries), or nullptr for
// a module we do not hook.
inline NvtxFunctionPointer* chained_slots(int index, NvtxCallbackModule module) {
  ChainedSlots& slots = g_chained[index];
  switch (module) {
    case NVTX_CB_MODULE_CORE: return slots.core;
    case NVTX_CB_MODULE_CORE2: return slots.core2;
    case NVTX_CB_MODULE_CUDA: return slots.cuda;
    case NVTX_CB_MODULE_CUDART: return slots.cudart;
    default: return nullptr;
  }
}

// Whether peakscope puts its own hook in `slot` of `module`.
bool handles_slot(NvtxCallbackModule module, unsigned slot);

// NVTX's loader finds an injection with dlsym(dlopen(NVTX_INJECTION64_PATH),
// "InitializeInjectionNvtx2"). Called by the interposed dlsym for a lookup
// of that name (or "InitializeInjectionNvtxExtension") on a real handle that
// answered `found`: when the library is another tool's, it becomes the
// chained tool and the answer is peakscope's own entry point, so peakscope
// sees NVTX even where a tool rewrites the variable inside the program (Nsight
// Systems' injection proxy does). Otherwise `found` comes back unchanged.
void* take_injection_lookup(void* handle, const char* name, void* found);

// Writes the hooks of instance `index` (0..kUnchained) into a module's table
// of `size` entries, as returned by the instance's GetModuleFunctionTable.
void install_hooks(int index, NvtxCallbackModule module, NvtxFunctionTable table, unsigned size);

}  // namespace psc::interpose::nvtx
