// A test double of CUPTI, built as libcupti.so.13 in a folder of its own
// ($(BUILD)/fakes/cupti), so a test chooses whether a process finds it. It has
// the part of the CUPTI API the recorder's backend uses, with CUPTI's
// behaviour where the backend depends on it:
//
// - one subscriber slot: cuptiSubscribe* fail with
//   CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED when it is held, and _v2
//   names the holder (FAKE_CUPTI_SUBSCRIBER_TAKEN=<tool> says another tool
//   holds it from the start);
// - activity records are real CUPTI structs (CUpti_ActivityMemory4,
//   CUpti_ActivityMemoryPool3, CUpti_ActivityKernel10) built from what the
//   test scripts (fake_cupti.h), kept only for the kinds the subscriber
//   enabled, with the source library only when allocation sources were
//   enabled, and stamped by the registered timestamp callback when the test
//   gives no time;
// - records reach the client only through buffers it hands out
//   (buffer-requested) and gets back (buffer-completed), walked with
//   cuptiActivityGetNextRecord; cuptiActivityFlushAll delivers on the calling
//   thread, fake_cupti_deliver(1) on a thread of the double's own, as CUPTI's
//   worker does.
//
// Built with -DFAKE_CUPTI_OLD it lacks cuptiSubscribe_v2,
// cuptiActivityEnableAllocationSource and cuptiActivityRegisterTimestampCallback.
#include "tests/fakes/fake_cupti.h"

#include <cupti.h>
#include <time.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#define FAKE_EXPORT extern "C" __attribute__((visibility("default")))

namespace {

std::mutex g_mutex;
// Never destroyed: the counts are written by a destructor, after static objects may be gone.
std::map<std::string, long long>& g_counts = *new std::map<std::string, long long>;
std::set<std::string>& g_strings = *new std::set<std::string>;  // names and sources: records point into these

CUpti_CallbackFunc g_callback = nullptr;
void* g_userdata = nullptr;
bool g_subscribed = false;
bool g_resource_domain = false;
CUpti_BuffersCallbackRequestFunc g_request = nullptr;
CUpti_BuffersCallbackCompleteFunc g_complete = nullptr;
CUpti_TimestampCallbackFunc g_timestamp = nullptr;
bool g_allocation_source = false;
std::set<int>& g_enabled = *new std::set<int>;

std::deque<std::vector<uint8_t>>& g_pending = *new std::deque<std::vector<uint8_t>>;  // waiting for a flush
std::map<void*, uint32_t>& g_context_ids = *new std::map<void*, uint32_t>;
std::map<void*, uint32_t>& g_context_devices = *new std::map<void*, uint32_t>;
std::map<std::pair<void*, void*>, uint32_t>& g_stream_ids = *new std::map<std::pair<void*, void*>, uint32_t>;
uint32_t g_next_context_id = 1;
uint32_t g_next_stream_id = 11;

void count(const std::string& name, long long v = 1) { g_counts[name] += v; }

uint64_t clock_ns(clockid_t clock) {
  timespec ts;
  clock_gettime(clock, &ts);
  return uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec);
}

// CUPTI's clock: the registered callback, else CLOCK_REALTIME (CUPTI's own on Linux).
uint64_t now() { return g_timestamp ? g_timestamp() : clock_ns(CLOCK_REALTIME); }

const char* keep(const char* s) { return s ? g_strings.insert(s).first->c_str() : nullptr; }

template <typename Record>
void queue_locked(const Record& r) {
  std::vector<uint8_t> bytes(sizeof r);
  std::memcpy(bytes.data(), &r, sizeof r);
  g_pending.push_back(std::move(bytes));
  count("records_queued");
}

bool enabled_locked(CUpti_ActivityKind kind) { return g_enabled.count(kind) != 0; }

// Buffer layout (private to the double, as CUPTI's is to CUPTI): each record
// is preceded by 8 bytes holding its size, and starts 8-byte aligned.
constexpr size_t kHeader = 8;
size_t aligned(size_t n) { return (n + 7) & ~size_t{7}; }

void deliver_now() {
  std::deque<std::vector<uint8_t>> records;
  CUpti_BuffersCallbackRequestFunc request;
  CUpti_BuffersCallbackCompleteFunc complete;
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    records.swap(g_pending);
    request = g_request;
    complete = g_complete;
  }
  if (!request || !complete) return;
  while (!records.empty()) {
    uint8_t* buffer = nullptr;
    size_t size = 0, max_records = 0;
    request(&buffer, &size, &max_records);
    if (!buffer || size == 0) {
      std::lock_guard<std::mutex> lock(g_mutex);
      count("records_dropped", static_cast<long long>(records.size()));
      return;
    }
    size_t used = 0, n = 0;
    while (!records.empty() && used + kHeader + aligned(records.front().size()) <= size &&
           (max_records == 0 || n < max_records)) {
      const std::vector<uint8_t>& r = records.front();
      const uint64_t length = r.size();
      std::memcpy(buffer + used, &length, sizeof length);
      std::memcpy(buffer + used + kHeader, r.data(), r.size());
      used += kHeader + aligned(r.size());
      ++n;
      records.pop_front();
    }
    {
      std::lock_guard<std::mutex> lock(g_mutex);
      count("records_delivered", static_cast<long long>(n));
      count("buffers");
    }
    complete(nullptr, 0, buffer, size, used);
    if (n == 0) return;  // a buffer too small for one record: give up rather than loop
  }
}

void fire(CUpti_CallbackId id, const void* data) {
  CUpti_CallbackFunc callback;
  void* userdata;
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    if (!g_subscribed || !g_resource_domain) return;
    callback = g_callback;
    userdata = g_userdata;
    count("callbacks");
  }
  callback(userdata, CUPTI_CB_DOMAIN_RESOURCE, id, data);
}

const char* taken_by() {
  const char* v = getenv("FAKE_CUPTI_SUBSCRIBER_TAKEN");
  return v && *v ? v : nullptr;
}

CUptiResult subscribe(CUpti_SubscriberHandle* subscriber, CUpti_CallbackFunc callback, void* userdata,
                      const char** holder) {
  if (!subscriber) return CUPTI_ERROR_INVALID_PARAMETER;
  std::lock_guard<std::mutex> lock(g_mutex);
  if (taken_by() || g_subscribed) {
    *holder = taken_by() ? taken_by() : "CUPTI for an earlier subscriber";
    count("subscribe_refused");
    return CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
  }
  g_subscribed = true;
  g_callback = callback;
  g_userdata = userdata;
  *subscriber = reinterpret_cast<CUpti_SubscriberHandle>(&g_subscribed);
  return CUPTI_SUCCESS;
}

uint32_t context_id_locked(void* context) {
  auto it = g_context_ids.find(context);
  if (it != g_context_ids.end()) return it->second;
  return g_context_ids[context] = g_next_context_id++;
}

uint32_t stream_id_locked(void* context, void* stream) {
  auto key = std::make_pair(context, stream);
  auto it = g_stream_ids.find(key);
  if (it != g_stream_ids.end()) return it->second;
  return g_stream_ids[key] = g_next_stream_id++;
}

}  // namespace

// ---- the CUPTI API ---------------------------------------------------------------------

FAKE_EXPORT CUptiResult cuptiGetVersion(uint32_t* version) {
  if (!version) return CUPTI_ERROR_INVALID_PARAMETER;
  const char* v = getenv("FAKE_CUPTI_VERSION");
#ifdef FAKE_CUPTI_OLD
  *version = v && *v ? uint32_t(strtoul(v, nullptr, 10)) : 130000;
#else
  *version = v && *v ? uint32_t(strtoul(v, nullptr, 10)) : CUPTI_API_VERSION;
#endif
  return CUPTI_SUCCESS;
}

FAKE_EXPORT CUptiResult cuptiGetResultString(CUptiResult result, const char** text) {
  switch (result) {
    case CUPTI_SUCCESS: *text = "CUPTI_SUCCESS"; break;
    case CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED:
      *text = "CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED";
      break;
    case CUPTI_ERROR_INVALID_PARAMETER: *text = "CUPTI_ERROR_INVALID_PARAMETER"; break;
    case CUPTI_ERROR_INVALID_KIND: *text = "CUPTI_ERROR_INVALID_KIND"; break;
    default: *text = "CUPTI_ERROR_UNKNOWN"; break;
  }
  return CUPTI_SUCCESS;
}

FAKE_EXPORT CUptiResult cuptiSubscribe(CUpti_SubscriberHandle* subscriber, CUpti_CallbackFunc callback,
                                       void* userdata) {
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    count("subscribe");
  }
  const char* holder = nullptr;
  return subscribe(subscriber, callback, userdata, &holder);
}

#ifndef FAKE_CUPTI_OLD
FAKE_EXPORT CUptiResult cuptiSubscribe_v2(CUpti_SubscriberHandle* subscriber, CUpti_CallbackFunc callback,
                                          void* userdata, CUpti_SubscriberParams* params) {
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    count("subscribe_v2");
    if (params && params->subscriberName) g_strings.insert(std::string("subscriber:") + params->subscriberName);
  }
  if (params && params->structSize != CUpti_SubscriberParams_STRUCT_SIZE) return CUPTI_ERROR_INVALID_PARAMETER;
  const char* holder = nullptr;
  const CUptiResult r = subscribe(subscriber, callback, userdata, &holder);
  if (r == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED && params && params->oldSubscriberName &&
      params->oldSubscriberSize) {
    std::strncpy(params->oldSubscriberName, holder, params->oldSubscriberSize - 1);
    params->oldSubscriberName[params->oldSubscriberSize - 1] = 0;
  }
  return r;
}
#endif

FAKE_EXPORT CUptiResult cuptiUnsubscribe(CUpti_SubscriberHandle) {
  std::lock_guard<std::mutex> lock(g_mutex);
  g_subscribed = false;
  return CUPTI_SUCCESS;
}

FAKE_EXPORT CUptiResult cuptiEnableDomain(uint32_t enable, CUpti_SubscriberHandle, CUpti_CallbackDomain domain) {
  std::lock_guard<std::mutex> lock(g_mutex);
  if (!g_subscribed) return CUPTI_ERROR_INVALID_PARAMETER;
  if (domain == CUPTI_CB_DOMAIN_RESOURCE) g_resource_domain = enable != 0;
  count("enable_domain." + std::to_string(domain));
  return CUPTI_SUCCESS;
}

FAKE_EXPORT CUptiResult cuptiGetContextId(CUcontext context, uint32_t* id) {
  if (!context || !id) return CUPTI_ERROR_INVALID_PARAMETER;
  std::lock_guard<std::mutex> lock(g_mutex);
  *id = context_id_locked(context);
  return CUPTI_SUCCESS;
}

FAKE_EXPORT CUptiResult cuptiGetDeviceId(CUcontext context, uint32_t* device) {
  if (!context || !device) return CUPTI_ERROR_INVALID_PARAMETER;
  std::lock_guard<std::mutex> lock(g_mutex);
  auto it = g_context_devices.find(context);
  if (it != g_context_devices.end()) {
    *device = it->second;
    return CUPTI_SUCCESS;
  }
  const uintptr_t v = reinterpret_cast<uintptr_t>(context);  // the fake driver's contexts: 0x1000 + device
  if (v < 0x1000 || v >= 0x1000 + 64) return CUPTI_ERROR_INVALID_PARAMETER;
  *device = uint32_t(v - 0x1000);
  return CUPTI_SUCCESS;
}

FAKE_EXPORT CUptiResult cuptiGetStreamIdEx(CUcontext context, CUstream stream, uint8_t, uint32_t* id) {
  if (!id) return CUPTI_ERROR_INVALID_PARAMETER;
  std::lock_guard<std::mutex> lock(g_mutex);
  *id = stream_id_locked(context, stream);
  return CUPTI_SUCCESS;
}

FAKE_EXPORT CUptiResult cuptiGetStreamId(CUcontext context, CUstream stream, uint32_t* id) {
  return cuptiGetStreamIdEx(context, stream, 0, id);
}

FAKE_EXPORT CUptiResult cuptiGetTimestamp(uint64_t* timestamp) {
  if (!timestamp) return CUPTI_ERROR_INVALID_PARAMETER;
  *timestamp = now();
  return CUPTI_SUCCESS;
}

FAKE_EXPORT CUptiResult cuptiActivityRegisterCallbacks(CUpti_BuffersCallbackRequestFunc request,
                                                       CUpti_BuffersCallbackCompleteFunc complete) {
  if (!request || !complete) return CUPTI_ERROR_INVALID_PARAMETER;
  std::lock_guard<std::mutex> lock(g_mutex);
  g_request = request;
  g_complete = complete;
  count("register_callbacks");
  return CUPTI_SUCCESS;
}

#ifndef FAKE_CUPTI_OLD
FAKE_EXPORT CUptiResult cuptiActivityRegisterTimestampCallback(CUpti_TimestampCallbackFunc callback) {
  if (!callback) return CUPTI_ERROR_INVALID_PARAMETER;
  std::lock_guard<std::mutex> lock(g_mutex);
  g_timestamp = callback;
  count("timestamp_callback");
  return CUPTI_SUCCESS;
}

FAKE_EXPORT CUptiResult cuptiActivityEnableAllocationSource(uint8_t enable) {
  std::lock_guard<std::mutex> lock(g_mutex);
  g_allocation_source = enable != 0;
  count("allocation_source");
  return CUPTI_SUCCESS;
}
#endif

FAKE_EXPORT CUptiResult cuptiActivityEnable(CUpti_ActivityKind kind) {
  std::lock_guard<std::mutex> lock(g_mutex);
  count("enable." + std::to_string(kind));
  if (kind != CUPTI_ACTIVITY_KIND_MEMORY2 && kind != CUPTI_ACTIVITY_KIND_MEMORY_POOL &&
      kind != CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL && kind != CUPTI_ACTIVITY_KIND_KERNEL)
    return CUPTI_ERROR_INVALID_KIND;
  g_enabled.insert(kind);
  return CUPTI_SUCCESS;
}

FAKE_EXPORT CUptiResult cuptiActivityDisable(CUpti_ActivityKind kind) {
  std::lock_guard<std::mutex> lock(g_mutex);
  g_enabled.erase(kind);
  return CUPTI_SUCCESS;
}

FAKE_EXPORT CUptiResult cuptiActivityFlushAll(uint32_t flag) {
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    count("flush_all");
    if (flag & CUPTI_ACTIVITY_FLAG_FLUSH_FORCED) count("flush_forced");
  }
  deliver_now();
  return CUPTI_SUCCESS;
}

FAKE_EXPORT CUptiResult cuptiActivityFlushPeriod(uint32_t ms) {
  std::lock_guard<std::mutex> lock(g_mutex);
  g_counts["flush_period_ms"] = ms;
  return CUPTI_SUCCESS;
}

FAKE_EXPORT CUptiResult cuptiActivityGetNextRecord(uint8_t* buffer, size_t valid, CUpti_Activity** record) {
  if (!buffer || !record) return CUPTI_ERROR_INVALID_PARAMETER;
  size_t offset = 0;
  if (*record) {
    const uint8_t* current = reinterpret_cast<const uint8_t*>(*record);
    uint64_t length;
    std::memcpy(&length, current - kHeader, sizeof length);
    offset = size_t(current - buffer) + aligned(length);
  }
  if (offset + kHeader > valid) return CUPTI_ERROR_MAX_LIMIT_REACHED;
  *record = reinterpret_cast<CUpti_Activity*>(buffer + offset + kHeader);
  return CUPTI_SUCCESS;
}

FAKE_EXPORT CUptiResult cuptiActivityGetNumDroppedRecords(CUcontext, uint32_t, size_t* dropped) {
  *dropped = 0;
  return CUPTI_SUCCESS;
}

FAKE_EXPORT CUptiResult cuptiFinalize() { return CUPTI_SUCCESS; }

// ---- the test's control API --------------------------------------------------------------

FAKE_EXPORT void fake_cupti_memory(const FakeCuptiMemory* in) {
  std::lock_guard<std::mutex> lock(g_mutex);
  if (!enabled_locked(CUPTI_ACTIVITY_KIND_MEMORY2)) return;
  CUpti_ActivityMemory4 m{};
  m.kind = CUPTI_ACTIVITY_KIND_MEMORY2;
  m.memoryOperationType =
      in->release ? CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE : CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION;
  m.memoryKind = static_cast<CUpti_ActivityMemoryKind>(in->memory_kind);
  m.address = in->address;
  m.bytes = in->bytes;
  m.timestamp = in->timestamp ? in->timestamp : now();
  m.deviceId = in->device;
  m.contextId = in->context_id;
  m.streamId = in->stream_id;
  m.isAsync = in->stream_id != CUPTI_INVALID_STREAM_ID;
  m.memoryPoolConfig.memoryPoolType = static_cast<CUpti_ActivityMemoryPoolType>(in->pool_type);
  m.memoryPoolConfig.address = in->pool_address;
  m.source = g_allocation_source ? keep(in->source) : nullptr;
  queue_locked(m);
}

FAKE_EXPORT void fake_cupti_pool(const FakeCuptiPool* in) {
  std::lock_guard<std::mutex> lock(g_mutex);
  if (!enabled_locked(CUPTI_ACTIVITY_KIND_MEMORY_POOL)) return;
  CUpti_ActivityMemoryPool3 p{};
  p.kind = CUPTI_ACTIVITY_KIND_MEMORY_POOL;
  p.memoryPoolOperationType = static_cast<CUpti_ActivityMemoryPoolOperationType>(in->operation);
  p.memoryPoolType = CUPTI_ACTIVITY_MEMORY_POOL_TYPE_LOCAL;
  p.deviceId = in->device;
  p.address = in->address;
  p.size = in->size;
  p.utilizedSize = in->utilized;
  p.timestamp = in->timestamp ? in->timestamp : now();
  queue_locked(p);
}

FAKE_EXPORT void fake_cupti_kernel(const FakeCuptiKernel* in) {
  std::lock_guard<std::mutex> lock(g_mutex);
  CUpti_ActivityKind kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
  if (!enabled_locked(kind)) kind = CUPTI_ACTIVITY_KIND_KERNEL;
  if (!enabled_locked(kind)) return;
  CUpti_ActivityKernel10 k{};
  k.kind = kind;
  k.start = in->start ? in->start : now();
  k.end = in->end ? in->end : now();
  k.deviceId = in->device;
  k.contextId = in->context_id;
  k.streamId = in->stream_id;
  k.localMemoryTotal_v2 = in->local_memory_bytes;
  k.name = keep(in->name);
  queue_locked(k);
}

FAKE_EXPORT void fake_cupti_context(int created, void* context, uint32_t device) {
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    g_context_devices[context] = device;
    context_id_locked(context);
  }
  CUpti_ResourceData data{};
  data.context = static_cast<CUcontext>(context);
  fire(created ? CUPTI_CBID_RESOURCE_CONTEXT_CREATED : CUPTI_CBID_RESOURCE_CONTEXT_DESTROY_STARTING, &data);
}

FAKE_EXPORT void fake_cupti_stream(int created, void* context, void* stream) {
  CUpti_ResourceData data{};
  data.context = static_cast<CUcontext>(context);
  data.resourceHandle.stream = static_cast<CUstream>(stream);
  fire(created ? CUPTI_CBID_RESOURCE_STREAM_CREATED : CUPTI_CBID_RESOURCE_STREAM_DESTROY_STARTING, &data);
}

FAKE_EXPORT void fake_cupti_module(int loaded, void* context, uint32_t module_id, size_t cubin_bytes) {
  CUpti_ModuleResourceData module{};
  module.moduleId = module_id;
  module.cubinSize = cubin_bytes;
  CUpti_ResourceData data{};
  data.context = static_cast<CUcontext>(context);
  data.resourceDescriptor = &module;
  fire(loaded ? CUPTI_CBID_RESOURCE_MODULE_LOADED : CUPTI_CBID_RESOURCE_MODULE_UNLOAD_STARTING, &data);
}

FAKE_EXPORT void fake_cupti_deliver(int on_own_thread) {
  if (on_own_thread) {
    std::thread worker(deliver_now);
    worker.join();
  } else {
    deliver_now();
  }
}

FAKE_EXPORT uint32_t fake_cupti_context_id(void* context) {
  std::lock_guard<std::mutex> lock(g_mutex);
  return context_id_locked(context);
}

FAKE_EXPORT uint32_t fake_cupti_stream_id(void* context, void* stream) {
  std::lock_guard<std::mutex> lock(g_mutex);
  return stream_id_locked(context, stream);
}

FAKE_EXPORT long long fake_cupti_count(const char* name) {
  std::lock_guard<std::mutex> lock(g_mutex);
  if (std::string(name) == "pending") return static_cast<long long>(g_pending.size());
  auto it = g_counts.find(name);
  if (it != g_counts.end()) return it->second;
  // Known counters read 0 before their first use.
  static const char* const kKnown[] = {"subscribe",         "subscribe_v2",   "allocation_source", "timestamp_callback",
                                       "flush_all",         "flush_forced",   "flush_period_ms",   "records_queued",
                                       "records_delivered", "buffers",        "callbacks",         "register_callbacks",
                                       "subscribe_refused", "records_dropped"};
  for (const char* known : kKnown)
    if (std::string(known) == name) return 0;
  return std::string(name).rfind("enable", 0) == 0 ? 0 : -1;
}

namespace {

// At exit (after every atexit handler, so after the recorder's last flush):
// the counts, "name value" per line, to $FAKE_CUPTI_COUNTS.
__attribute__((destructor)) void dump_counts() {
  const char* path = getenv("FAKE_CUPTI_COUNTS");
  if (!path || !*path) return;
  std::string file = path;
  const char* primary = getenv("FAKE_PRIMARY_PID");
  if (primary && *primary && atol(primary) != long(getpid())) file += "." + std::to_string(getpid());
  FILE* f = fopen(file.c_str(), "w");
  if (!f) return;
  std::lock_guard<std::mutex> lock(g_mutex);
  g_counts["pending"] = static_cast<long long>(g_pending.size());
  for (const auto& [name, value] : g_counts) fprintf(f, "%s %lld\n", name.c_str(), value);
  fclose(f);
}

}  // namespace
