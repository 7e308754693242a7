// The CUPTI backend: what no allocator hook sees. Started once, right after
// the process's first successful cuInit (cuda_driver_hooks.cc), as an
// injection library would be, so it sees the primary context's creation and
// every module load. PEAKSCOPE_CUPTI=0 never starts it; =1 also says on
// stderr why it could not start.
//
// Start-up, each step optional where CUPTI may lack it (the `cupti.on` mark
// says which ran):
//   dlopen libcupti.so.13 (or PEAKSCOPE_CUPTI_LIBRARY), check it is CUPTI 13:
//     the activity records' layouts are those of this build's headers;
//   cuptiSubscribe_v2 (named "peakscope"; told the holder's name when the one
//     subscriber slot is taken), else cuptiSubscribe;
//   the resource domain (contexts, streams, modules: marks, in true order);
//   our clock for CUPTI's timestamps, else an offset measured now;
//   activity buffers, allocation sources, MEMORY2, MEMORY_POOL and
//     CONCURRENT_KERNEL (else KERNEL) records, flushed every 100 ms.
//
// The slot taken (Nsight Systems, the PyTorch profiler, cuda-gdb): recording
// goes on through the hooks; one stderr line and one `cupti.unavailable` mark
// say so. Every other failure leaves the same mark with its reason.
//
// Hazards: CUPTI calls us back on its own worker thread (buffers) and inside
// driver calls on the application's threads (resources); the recorder's
// per-thread buffers serve both. At exit, CUPTI must be flushed while it is
// still alive: an atexit handler registered at start runs before any
// library's destructor (ours runs last, being preloaded); `_exit` and
// psc_flush go through the recorder's flush hook. A fork child has no CUPTI
// session and never calls it.
#include <dlfcn.h>
#include <pthread.h>
#include <stdlib.h>

#include "interpose/cuda_hooks.h"
#include "interpose/cupti_backend.h"
#include "interpose/payload.h"
#include "runtime/config.h"

namespace psc::interpose::cupti {

Functions g_fn;
int64_t g_clock_offset_ns = 0;

namespace {

enum class State : uint32_t {
  kIdle = 0,     // not tried yet
  kStarting,     // one thread is starting it; others go on without waiting
  kRunning,      // subscribed, activity enabled
  kUnavailable,  // tried and failed, or disabled: never tried again
  kStopped,      // flushed at exit, or a fork child: no more CUPTI calls
};
std::atomic<uint32_t> g_state{static_cast<uint32_t>(State::kIdle)};

constexpr uint32_t kCuptiMajor = CUPTI_API_VERSION / 10000;  // 13: xxyyzz since CUDA 13
constexpr uint32_t kFlushPeriodMs = 100;

bool is(State s) { return g_state.load(std::memory_order_acquire) == static_cast<uint32_t>(s); }
void set(State s) { g_state.store(static_cast<uint32_t>(s), std::memory_order_release); }

const char* result_text(CUptiResult r) {
  const char* text = nullptr;
  if (g_fn.result_string && g_fn.result_string(r, &text) == CUPTI_SUCCESS && text) return text;
  return "CUPTI error";
}

// One `cupti.unavailable` mark; on stderr as well when `tell` (and not quiet).
void unavailable(const char* reason, const char* tool, bool tell) {
  JsonPayload<512> payload;
  payload.text("reason", reason);
  if (tool) payload.text("tool", tool);
  rt::record_mark("cupti.unavailable", payload.str(), Api::kNone);
  if (tell && !rt::g_config.quiet) {
    if (tool) {
      sys::say("CUPTI is held by ", tool,
               ": recording through the hooks only (no CUPTI allocations, modules or kernels)");
    } else {
      sys::say("CUPTI backend off: ", reason);
    }
  }
  set(State::kUnavailable);
}

// "what: CUPTI's reason (code)" into `out`.
void describe_failure(char* out, size_t size, const char* what, CUptiResult r) {
  size_t n = 0;
  auto put = [&](const char* s) {
    while (*s && n + 1 < size) out[n++] = *s++;
  };
  char code[24];
  sys::format_uint(code, static_cast<uint64_t>(r));
  put(what);
  put(": ");
  put(result_text(r));
  put(" (");
  put(code);
  put(")");
  out[n] = 0;
}

template <typename Fn>
void resolve(void* library, Fn* out, const char* name) {
  *out = reinterpret_cast<Fn>(cuda::real_dlsym()(library, name));
}

void* open_library(const char** tried) {
  const char* configured = rt::g_config.cupti_library;
  if (rt::g_config.cupti_library_too_long) {
    // Cut to fit, it would load another file than the one named.
    *tried = "PEAKSCOPE_CUPTI_LIBRARY (over 4095 bytes, PATH_MAX)";
    return nullptr;
  }
  *tried = *configured ? configured : "libcupti.so.13";
  void* library = dlopen(*tried, RTLD_NOW | RTLD_LOCAL);
  if (!library) dlerror();  // leave no error behind for the application's next dlerror()
  return library;
}

void resolve_all(void* library) {
  Functions f{};
  resolve(library, &f.get_version, "cuptiGetVersion");
  resolve(library, &f.result_string, "cuptiGetResultString");
  resolve(library, &f.subscribe, "cuptiSubscribe");
  resolve(library, &f.subscribe_v2, "cuptiSubscribe_v2");
  resolve(library, &f.enable_domain, "cuptiEnableDomain");
  resolve(library, &f.context_id, "cuptiGetContextId");
  resolve(library, &f.device_id, "cuptiGetDeviceId");
  resolve(library, &f.stream_id_ex, "cuptiGetStreamIdEx");
  resolve(library, &f.stream_id, "cuptiGetStreamId");
  resolve(library, &f.timestamp, "cuptiGetTimestamp");
  resolve(library, &f.register_callbacks, "cuptiActivityRegisterCallbacks");
  resolve(library, &f.register_timestamp, "cuptiActivityRegisterTimestampCallback");
  resolve(library, &f.enable_allocation_source, "cuptiActivityEnableAllocationSource");
  resolve(library, &f.enable, "cuptiActivityEnable");
  resolve(library, &f.flush_all, "cuptiActivityFlushAll");
  resolve(library, &f.flush_period, "cuptiActivityFlushPeriod");
  resolve(library, &f.next_record, "cuptiActivityGetNextRecord");
  resolve(library, &f.dropped_records, "cuptiActivityGetNumDroppedRecords");
  dlerror();
  g_fn = f;
}

// ---- resource callbacks (application threads, inside driver calls) -----------------

uint32_t context_id_of(CUcontext context) {
  uint32_t id = CUPTI_INVALID_CONTEXT_ID;
  if (!context || !g_fn.context_id || g_fn.context_id(context, &id) != CUPTI_SUCCESS) return CUPTI_INVALID_CONTEXT_ID;
  return id;
}

int64_t device_of(CUcontext context) {
  uint32_t device = 0;
  if (!context || !g_fn.device_id || g_fn.device_id(context, &device) != CUPTI_SUCCESS) return -1;
  return device;
}

uint32_t stream_id_of(CUcontext context, CUstream stream) {
  uint32_t id = CUPTI_INVALID_STREAM_ID;
  if (g_fn.stream_id_ex) {
    if (g_fn.stream_id_ex(context, stream, 0, &id) == CUPTI_SUCCESS) return id;
  } else if (g_fn.stream_id && g_fn.stream_id(context, stream, &id) == CUPTI_SUCCESS) {
    return id;
  }
  return CUPTI_INVALID_STREAM_ID;
}

void context_event(const CUpti_ResourceData& data, const char* event) {
  JsonPayload<256> payload;
  payload.text("event", event)
      .signed_number("device", device_of(data.context))
      .number("context_id", context_id_of(data.context));
  rt::record_mark("cupti.context", payload.str(), Api::kNone);
}

void stream_event(const CUpti_ResourceData& data, const char* event) {
  const uint32_t context_id = context_id_of(data.context);
  const uint32_t stream_id = stream_id_of(data.context, data.resourceHandle.stream);
  const uint64_t handle = reinterpret_cast<uint64_t>(data.resourceHandle.stream);
  // Kept after destruction: records of the stream may arrive later, and
  // CUPTI does not reuse stream ids.
  if (stream_id != CUPTI_INVALID_STREAM_ID) remember_stream(context_id, stream_id, handle);
  JsonPayload<256> payload;
  payload.text("event", event)
      .signed_number("device", device_of(data.context))
      .number("context_id", context_id)
      .number("stream_id", stream_id)
      .number("stream", handle);
  rt::record_mark("cupti.stream", payload.str(), Api::kNone);
}

void module_event(const CUpti_ResourceData& data, const char* event) {
  const auto* module = static_cast<const CUpti_ModuleResourceData*>(data.resourceDescriptor);
  if (!module) return;
  JsonPayload<256> payload;
  payload.text("event", event)
      .number("id", module->moduleId)
      .number("bytes", module->cubinSize)
      .signed_number("device", device_of(data.context))
      .number("context_id", context_id_of(data.context));
  rt::record_mark("cupti.module", payload.str(), Api::kNone);
}

void CUPTIAPI on_callback(void*, CUpti_CallbackDomain domain, CUpti_CallbackId id, const void* data) {
  if (domain != CUPTI_CB_DOMAIN_RESOURCE || !data || !rt::enabled() || !is(State::kRunning)) return;
  const auto& resource = *static_cast<const CUpti_ResourceData*>(data);
  switch (id) {
    case CUPTI_CBID_RESOURCE_CONTEXT_CREATED: context_event(resource, "create"); break;
    case CUPTI_CBID_RESOURCE_CONTEXT_DESTROY_STARTING: context_event(resource, "destroy"); break;
    case CUPTI_CBID_RESOURCE_STREAM_CREATED: stream_event(resource, "create"); break;
    case CUPTI_CBID_RESOURCE_STREAM_DESTROY_STARTING: stream_event(resource, "destroy"); break;
    case CUPTI_CBID_RESOURCE_MODULE_LOADED: module_event(resource, "load"); break;
    case CUPTI_CBID_RESOURCE_MODULE_UNLOAD_STARTING: module_event(resource, "unload"); break;
    default: break;
  }
}

// ---- flushing ------------------------------------------------------------------------

uint64_t CUPTIAPI trace_clock() { return sys::monotonic_ns(); }

// Hands every buffered record over (completed on this thread).
void flush_records(uint32_t flag) {
  if (!is(State::kRunning) || !g_fn.flush_all) return;
  g_fn.flush_all(flag);
}

void flush_for_recorder() { flush_records(0); }

// Runs in exit(), before any destructor: CUPTI is still alive. Forced: a
// record still open (a kernel the program never waited for) is handed over
// as it stands.
void flush_at_exit() {
  // Not in a vfork child running its parent's handlers: CUPTI is the parent's.
  if (getpid() != rt::recorder_owner()) return;
  flush_records(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  if (is(State::kRunning)) set(State::kStopped);
}

void stop_in_child() {
  if (is(State::kRunning) || is(State::kStarting)) set(State::kStopped);
  forget_records_in_child();
}

// ---- start-up --------------------------------------------------------------------------

struct Started {
  bool memory = false, pools = false, allocation_source = false, own_clock = false;
  const char* kernels = "none";
  const char* subscribed_with = "cuptiSubscribe";
};

// Subscribes; false (after the unavailable mark) when it could not.
bool subscribe(Started& started) {
  CUpti_SubscriberHandle subscriber = nullptr;
  char holder[CUPTI_OLD_SUBSCRIBER_NAME_MIN_LEN + 1] = {};
  CUptiResult r;
  if (g_fn.subscribe_v2) {
    CUpti_SubscriberParams params{};
    params.structSize = CUpti_SubscriberParams_STRUCT_SIZE;
    params.subscriberName = "peakscope";
    params.oldSubscriberName = holder;
    params.oldSubscriberSize = sizeof holder - 1;
    r = g_fn.subscribe_v2(&subscriber, on_callback, nullptr, &params);
    started.subscribed_with = "cuptiSubscribe_v2";
  } else if (g_fn.subscribe) {
    r = g_fn.subscribe(&subscriber, on_callback, nullptr);
  } else {
    unavailable("libcupti has no cuptiSubscribe", nullptr, rt::g_config.cupti == rt::CuptiMode::kOn);
    return false;
  }
  if (r == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED) {
    unavailable("subscriber slot taken", holder[0] ? holder : "another CUPTI client", true);
    return false;
  }
  if (r != CUPTI_SUCCESS) {
    char reason[160];
    describe_failure(reason, sizeof reason, started.subscribed_with, r);
    unavailable(reason, nullptr, rt::g_config.cupti == rt::CuptiMode::kOn);
    return false;
  }
  if (g_fn.enable_domain) g_fn.enable_domain(1, subscriber, CUPTI_CB_DOMAIN_RESOURCE);
  return true;
}

// Timestamps first: records made before this would carry CUPTI's own clock.
void choose_clock(Started& started) {
  if (g_fn.register_timestamp && g_fn.register_timestamp(trace_clock) == CUPTI_SUCCESS) {
    started.own_clock = true;
    return;
  }
  uint64_t cupti_now = 0;
  if (g_fn.timestamp && g_fn.timestamp(&cupti_now) == CUPTI_SUCCESS && cupti_now)
    g_clock_offset_ns = static_cast<int64_t>(sys::monotonic_ns()) - static_cast<int64_t>(cupti_now);
}

bool enable_activity(Started& started) {
  if (!g_fn.register_callbacks || !g_fn.enable || !g_fn.next_record) {
    unavailable("libcupti lacks the activity API", nullptr, rt::g_config.cupti == rt::CuptiMode::kOn);
    return false;
  }
  const CUptiResult r = g_fn.register_callbacks(buffer_requested, buffer_completed);
  if (r != CUPTI_SUCCESS) {
    char reason[160];
    describe_failure(reason, sizeof reason, "cuptiActivityRegisterCallbacks", r);
    unavailable(reason, nullptr, rt::g_config.cupti == rt::CuptiMode::kOn);
    return false;
  }
  // Before MEMORY2 is enabled, so that every record has its source.
  started.allocation_source = g_fn.enable_allocation_source && g_fn.enable_allocation_source(1) == CUPTI_SUCCESS;
  started.memory = g_fn.enable(CUPTI_ACTIVITY_KIND_MEMORY2) == CUPTI_SUCCESS;
  started.pools = g_fn.enable(CUPTI_ACTIVITY_KIND_MEMORY_POOL) == CUPTI_SUCCESS;
  if (g_fn.enable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) == CUPTI_SUCCESS) {
    started.kernels = "concurrent_kernel";
  } else if (g_fn.enable(CUPTI_ACTIVITY_KIND_KERNEL) == CUPTI_SUCCESS) {
    started.kernels = "kernel";  // serialises kernels: slower, still correct
  }
  if (g_fn.flush_period) g_fn.flush_period(kFlushPeriodMs);
  return true;
}

void start() {
  const char* tried = nullptr;
  void* library = open_library(&tried);
  if (!library) {
    char reason[600] = "not found: ";
    size_t n = 11;
    for (const char* s = tried; *s && n + 1 < sizeof reason; ++s) reason[n++] = *s;
    reason[n] = 0;
    unavailable(reason, nullptr, rt::g_config.cupti == rt::CuptiMode::kOn);
    return;
  }
  resolve_all(library);
  uint32_t version = 0;
  if (!g_fn.get_version || g_fn.get_version(&version) != CUPTI_SUCCESS || version / 10000 != kCuptiMajor) {
    char reason[160] = "libcupti API version ";
    sys::format_uint(reason + 21, version);
    size_t n = 0;
    while (reason[n]) ++n;
    const char tail[] = ": this build reads CUPTI 13 records";
    for (size_t i = 0; tail[i] && n + 1 < sizeof reason; ++i) reason[n++] = tail[i];
    reason[n] = 0;
    unavailable(reason, nullptr, rt::g_config.cupti == rt::CuptiMode::kOn);
    return;
  }
  Started started;
  if (!subscribe(started)) return;
  choose_clock(started);
  if (!enable_activity(started)) return;
  rt::set_flush_hook(flush_for_recorder);
  atexit(flush_at_exit);
  set(State::kRunning);
  JsonPayload<512> payload;
  payload.number("version", version)
      .text("subscribe", started.subscribed_with)
      .text("timestamps", started.own_clock ? "callback" : "offset")
      .boolean("allocation_source", started.allocation_source)
      .boolean("memory", started.memory)
      .boolean("pools", started.pools)
      .text("kernels", started.kernels);
  rt::record_mark("cupti.on", payload.str(), Api::kNone);
}

__attribute__((constructor(103))) void init_cupti_fork_handling() {
  pthread_atfork(nullptr, nullptr, stop_in_child);
  rt::add_raw_clone_hook(stop_in_child);
}

}  // namespace

// Once per process; a racing or re-entrant caller (CUPTI itself calling cuInit)
// returns at once.
void start_once() {
  if (!is(State::kIdle) || !rt::enabled()) return;
  uint32_t idle = static_cast<uint32_t>(State::kIdle);
  if (!g_state.compare_exchange_strong(idle, static_cast<uint32_t>(State::kStarting), std::memory_order_acq_rel))
    return;
  if (rt::g_config.cupti == rt::CuptiMode::kOff) {
    unavailable("PEAKSCOPE_CUPTI=0", nullptr, false);
    return;
  }
  start();
  if (is(State::kStarting)) set(State::kUnavailable);
}

}  // namespace psc::interpose::cupti

namespace psc::interpose::cuda {

void after_cu_init() { cupti::start_once(); }

}  // namespace psc::interpose::cuda

// The CUPTI major version whose activity records this build reads: data, not
// code, so `peakscope version` can tell from the library's symbol table,
// without loading it, that the CUPTI backend is built in (cli/recorder_library.h).
PSC_EXPORT const uint32_t psc_cupti_major = psc::interpose::cupti::kCuptiMajor;
