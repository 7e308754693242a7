// The CUPTI backend and the device-level samples, through the real LD_PRELOAD
// path against the CUPTI double ($(BUILD)/fakes/cupti/libcupti.so.13): the
// client (tests/cuda/cupti_client.cc) scripts activity records and resource
// callbacks; the trace must carry each exactly as docs/cuda.md ("CUPTI")
// says, and recording through the hooks must not change whether CUPTI is
// there, taken by another tool, older, or off.
#include <nlohmann/json.hpp>

#include "tests/end_to_end/cuda/cuda_support.h"

namespace psc::cuda_test {
namespace {

std::string with_cupti(const std::string& folder = "cupti") {
  return "LD_LIBRARY_PATH=" + fakes() + "/" + folder + ":" + fakes();
}

// The double's counts, written at exit (after the recorder's last flush).
std::string cupti_counts(const Scratch& s) { return " FAKE_CUPTI_COUNTS=" + s.path("cupti.counts"); }

std::vector<Event> marks(const LoadedTrace& t, const std::string& name) {
  std::vector<Event> out;
  for (const Event& e : t.events)
    if (e.kind == EventKind::kMark && t.meta.string(e.name) == name) out.push_back(e);
  return out;
}

std::vector<Event> counters(const LoadedTrace& t, const std::string& name) {
  std::vector<Event> out;
  for (const Event& e : t.events)
    if (e.kind == EventKind::kCounter && t.meta.string(e.name) == name) out.push_back(e);
  return out;
}

nlohmann::json payload(const LoadedTrace& t, const Event& e) {
  return nlohmann::json::parse(std::string(t.meta.string(e.payload)));
}

bool deferred(const Event& e) { return (e.flags & kFlagDeferred) != 0; }

// The CUPTI events of one kind at one address.
std::vector<Event> cupti_at(const LoadedTrace& t, EventKind kind, uint64_t address) {
  std::vector<Event> out;
  for (const Event& e : select(t, kind, Api::kCupti))
    if (e.address == address) out.push_back(e);
  return out;
}

// Addresses and sizes the client scripts (tests/cuda/cupti_client.cc).
constexpr uint64_t kHooked = (3u << 20) + 1;
constexpr uint64_t kCublasAddress = 0x7a0000000000ull;
constexpr uint64_t kNcclAddress = 0x7a0010000000ull;
constexpr uint64_t kManagedAddress = 0x7a0020000000ull;
constexpr uint64_t kPinnedAddress = 0x7f1000000000ull;
constexpr uint64_t kStampedAddress = 0x7a0030000000ull;
constexpr uint64_t kAtExitAddress = 0x7a0040000000ull;

class CudaCupti : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    scratch_ = new Scratch;
    run_ = new ClientRun(
        run_client(*scratch_, client("cupti_client") + " script", with_cupti() + cupti_counts(*scratch_)));
    counts_ = new Values(read_values(scratch_->path("cupti.counts")));
  }
  static void TearDownTestSuite() {
    delete counts_;
    delete run_;
    delete scratch_;
  }
  static Scratch* scratch_;
  static ClientRun* run_;
  static Values* counts_;
};
Scratch* CudaCupti::scratch_ = nullptr;
ClientRun* CudaCupti::run_ = nullptr;
Values* CudaCupti::counts_ = nullptr;

TEST_F(CudaCupti, StartsAfterCuInitWithEveryCuda13Feature) {
  ASSERT_CLIENT_RAN(*run_);
  const std::vector<Event> on = marks(run_->trace, "cupti.on");
  ASSERT_EQ(on.size(), 1u);
  const nlohmann::json p = payload(run_->trace, on[0]);
  EXPECT_EQ(p["subscribe"], "cuptiSubscribe_v2");
  EXPECT_EQ(p["timestamps"], "callback");
  EXPECT_EQ(p["allocation_source"], true);
  EXPECT_EQ(p["memory"], true);
  EXPECT_EQ(p["pools"], true);
  EXPECT_EQ(p["kernels"], "concurrent_kernel");
  EXPECT_TRUE(marks(run_->trace, "cupti.unavailable").empty());
  EXPECT_EQ(number(*counts_, "subscribe_v2"), 1u);
  EXPECT_EQ(number(*counts_, "subscribe"), 0u);
  EXPECT_EQ(number(*counts_, "timestamp_callback"), 1u);
  EXPECT_EQ(number(*counts_, "allocation_source"), 1u);
  EXPECT_EQ(number(*counts_, "enable.49"), 1u) << "MEMORY2";
  EXPECT_EQ(number(*counts_, "enable.50"), 1u) << "MEMORY_POOL";
  EXPECT_EQ(number(*counts_, "enable.10"), 1u) << "CONCURRENT_KERNEL";
  EXPECT_EQ(number(*counts_, "enable.3"), 0u) << "KERNEL serialises kernels: only when CONCURRENT_KERNEL fails";
  EXPECT_EQ(number(*counts_, "flush_period_ms"), 100u);
  EXPECT_EQ(number(run_->driver, "cuInit.calls"), 1u) << "the recorder never initialises CUDA itself";
}

TEST_F(CudaCupti, EveryMemoryRecordAppearsOnceWithItsSourceDeviceAndTime) {
  ASSERT_CLIENT_RAN(*run_);
  const LoadedTrace& t = run_->trace;
  const Values& v = run_->output;
  struct Want {
    uint64_t address, bytes;
    MemoryKind memory;
    std::string source;
    uint64_t time;
    uint64_t stream;
  };
  const uint64_t t_cublas = number(v, "t_cublas");
  const Want wants[] = {
      {number(v, "hooked"), kHooked, MemoryKind::kDevice, "/usr/lib/libtorch_cuda.so", number(v, "t_hooked"), 0},
      {kCublasAddress, 32u << 20, MemoryKind::kDevice, "/opt/nvidia/lib/libcublas.so.13", t_cublas,
       number(v, "stream")},
      {kNcclAddress, 4u << 20, MemoryKind::kPool, "libnccl.so.2", t_cublas + 1000, 0},
      {kManagedAddress, 6u << 20, MemoryKind::kManaged, "", t_cublas + 2000, 0},
      {kPinnedAddress, 1u << 20, MemoryKind::kPinnedHost, "libcudnn.so.9", t_cublas + 3000, 0},
  };
  for (const Want& w : wants) {
    const std::vector<Event> found = cupti_at(t, EventKind::kAlloc, w.address);
    ASSERT_EQ(found.size(), 1u) << w.source;
    const Event& e = found[0];
    EXPECT_EQ(e.bytes, w.bytes) << w.source;
    EXPECT_EQ(e.device, 0) << w.source;
    EXPECT_EQ(e.memory, w.memory) << w.source;
    EXPECT_EQ(t.meta.string(e.name), w.source);
    EXPECT_EQ(e.time_ns, w.time) << "CUPTI's timestamp, on the trace's clock: " << w.source;
    EXPECT_EQ(e.stream, w.stream) << w.source;
    EXPECT_TRUE(deferred(e)) << w.source;
    EXPECT_EQ(e.range.value, 0u) << "deferred events are placed by time, not by the range open now";
    EXPECT_EQ(e.flags, kFlagDeferred) << "no other flag: not nested, not reserved";
  }
  // No time scripted: CUPTI asked the recorder's clock when the record was made.
  const std::vector<Event> stamped = cupti_at(t, EventKind::kAlloc, kStampedAddress);
  ASSERT_EQ(stamped.size(), 1u);
  EXPECT_GE(stamped[0].time_ns, number(v, "before_stamped"));
  EXPECT_LE(stamped[0].time_ns, number(v, "after_stamped"));
  const std::vector<Event> freed = cupti_at(t, EventKind::kFree, kCublasAddress);
  ASSERT_EQ(freed.size(), 1u);
  EXPECT_EQ(freed[0].bytes, 32u << 20);
  EXPECT_EQ(freed[0].time_ns, number(v, "t_cublas_free"));
  EXPECT_EQ(t.meta.string(freed[0].name), "/opt/nvidia/lib/libcublas.so.13");
  // Every record once, nothing invented: 8 scripted memory records.
  EXPECT_EQ(select(t, EventKind::kAlloc, Api::kCupti).size() + select(t, EventKind::kFree, Api::kCupti).size(), 8u);
  // Deferred: learnt after later events, so out of time order in the file.
  EXPECT_LT(cupti_at(t, EventKind::kAlloc, kCublasAddress)[0].time_ns,
            cupti_at(t, EventKind::kAlloc, number(v, "hooked"))[0].time_ns);
}

TEST_F(CudaCupti, HookedAllocationsStillRecordThroughTheHooks) {
  ASSERT_CLIENT_RAN(*run_);
  const std::vector<Event> mallocs = select(run_->trace, EventKind::kAlloc, Api::kCudaMalloc);
  int hooked = 0;
  for (const Event& e : mallocs) {
    if (e.address != number(run_->output, "hooked")) continue;
    ++hooked;
    EXPECT_EQ(e.bytes, kHooked);
    EXPECT_FALSE(deferred(e));
    EXPECT_FALSE(nested(e));
  }
  EXPECT_EQ(hooked, 1) << "the recorder does not deduplicate: the hook's event and CUPTI's both stay";
  // Hook-level accounting is unchanged by CUPTI's events (they are api cupti).
  uint64_t hooked_bytes = 0;
  for (const Event& e : run_->trace.events)
    if (e.kind == EventKind::kAlloc && e.api != Api::kCupti && !nested(e)) hooked_bytes += e.bytes;
  EXPECT_EQ(hooked_bytes, number(run_->driver, "allocated_bytes"));
}

TEST_F(CudaCupti, FirstExecutionOfEachKernelIsMarkedOnce) {
  ASSERT_CLIENT_RAN(*run_);
  const LoadedTrace& t = run_->trace;
  const std::vector<Event> first = marks(t, "cupti.first_kernel");
  std::map<std::string, Event> by_name;
  for (const Event& e : first) {
    const nlohmann::json p = payload(t, e);
    EXPECT_TRUE(by_name.emplace(p["kernel"].get<std::string>(), e).second) << "twice: " << p["kernel"];
    EXPECT_TRUE(deferred(e));
    EXPECT_EQ(e.time_ns, p["start_ns"].get<uint64_t>());
    EXPECT_EQ(p["end_ns"].get<uint64_t>(), e.time_ns + 2000);
    EXPECT_EQ(p["device"], 0);
    EXPECT_EQ(p["stream"].get<uint64_t>(), number(run_->output, "stream"));
    EXPECT_EQ(e.stream, number(run_->output, "stream"));
    EXPECT_EQ(p["stream_id"].get<uint64_t>(), number(run_->output, "stream_id"));
    EXPECT_EQ(p["local_memory_bytes"], 65536);
  }
  ASSERT_EQ(by_name.size(), 3u) << "A (run three times), B, and C (left for the exit flush)";
  const uint64_t t_kernel = number(run_->output, "t_kernel");
  EXPECT_EQ(by_name.at("_Z7kernelAPf").time_ns, t_kernel) << "the first run of A, not a later one";
  EXPECT_EQ(by_name.at("_Z7kernelBPf").time_ns, t_kernel + 10000);
  EXPECT_EQ(by_name.count("_Z7kernelCPf"), 1u);
}

TEST_F(CudaCupti, ResourceCallbacksAreMarksInTrueOrder) {
  ASSERT_CLIENT_RAN(*run_);
  const LoadedTrace& t = run_->trace;
  const std::vector<Event> context = marks(t, "cupti.context");
  ASSERT_EQ(context.size(), 1u);
  EXPECT_EQ(payload(t, context[0]), nlohmann::json::parse(R"({"event":"create","device":0,"context_id":)" +
                                                          std::to_string(number(run_->output, "context_id")) + "}"));
  const std::vector<Event> stream = marks(t, "cupti.stream");
  ASSERT_EQ(stream.size(), 1u);
  const nlohmann::json s = payload(t, stream[0]);
  EXPECT_EQ(s["event"], "create");
  EXPECT_EQ(s["stream"].get<uint64_t>(), number(run_->output, "stream"));
  EXPECT_EQ(s["stream_id"].get<uint64_t>(), number(run_->output, "stream_id"));
  EXPECT_EQ(s["device"], 0);
  const std::vector<Event> module = marks(t, "cupti.module");
  ASSERT_EQ(module.size(), 1u);
  const nlohmann::json m = payload(t, module[0]);
  EXPECT_EQ(m["event"], "load");
  EXPECT_EQ(m["id"], 7);
  EXPECT_EQ(m["bytes"], 123456);
  for (const Event* e : {&context[0], &stream[0], &module[0]}) EXPECT_FALSE(deferred(*e));
  EXPECT_LT(context[0].seq, stream[0].seq);
  EXPECT_LT(stream[0].seq, module[0].seq);
}

TEST_F(CudaCupti, PoolRecordsAreDeferredCounters) {
  ASSERT_CLIENT_RAN(*run_);
  const std::vector<Event> used = counters(run_->trace, "cupti.pool_used_bytes:0x0000000000006a00");
  const std::vector<Event> size = counters(run_->trace, "cupti.pool_size_bytes:0x0000000000006a00");
  ASSERT_EQ(used.size(), 1u);
  ASSERT_EQ(size.size(), 1u);
  EXPECT_EQ(used[0].bytes, 4u << 20);
  EXPECT_EQ(size[0].bytes, 64u << 20);
  EXPECT_EQ(used[0].time_ns, number(run_->output, "t_cublas") + 500);
  EXPECT_TRUE(deferred(used[0]));
  EXPECT_EQ(used[0].device, 0);
}

TEST_F(CudaCupti, DeviceUsedBytesAreSampledAtWaveAndLayerBoundaries) {
  ASSERT_CLIENT_RAN(*run_);
  const LoadedTrace& t = run_->trace;
  const std::vector<Event> used = counters(t, "device_used_bytes");
  const Values& v = run_->output;
  const uint64_t want[] = {number(v, "used_wave_push"), number(v, "used_layer_push"), number(v, "used_layer_pop"),
                           number(v, "used_wave_pop")};
  ASSERT_EQ(used.size(), 4u) << "wave push, layer push, layer pop, wave pop; not_a_boundary is not sampled";
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(used[i].bytes, want[i]) << i;
    EXPECT_EQ(used[i].device, 0);
    EXPECT_FALSE(deferred(used[i])) << "sampled synchronously: in true order";
  }
  EXPECT_GE(used[0].bytes, 300u << 20) << "includes what no allocation accounts for";
  EXPECT_EQ(t.meta.string(used[1].range), "forward/layer.0");
  const std::vector<Event> total = counters(t, "device_total_bytes");
  ASSERT_EQ(total.size(), 1u) << "once per device";
  EXPECT_EQ(total[0].bytes, 80ull << 30);
  EXPECT_LT(total[0].seq, used[0].seq);
}

TEST_F(CudaCupti, EverythingStillInCuptisBuffersAtExitReachesTheTrace) {
  ASSERT_CLIENT_RAN(*run_);
  EXPECT_EQ(number(run_->output, "pending_after_flush"), 0u) << "psc_flush flushes CUPTI first";
  EXPECT_EQ(number(run_->output, "pending_at_exit"), 2u);
  EXPECT_EQ(cupti_at(run_->trace, EventKind::kAlloc, kAtExitAddress).size(), 1u);
  EXPECT_EQ(number(*counts_, "pending"), 0u);
  EXPECT_EQ(number(*counts_, "flush_forced"), 1u) << "one forced flush, at exit";
  EXPECT_EQ(number(*counts_, "records_delivered"), number(*counts_, "records_queued"));
  EXPECT_TRUE(run_->trace.meta.clean_end);
}

TEST(CudaCuptiExit, UnderscoreExitFlushesCuptiFirst) {
  Scratch s;
  ClientRun run = run_client(s, client("cupti_client") + " quick_exit", with_cupti());
  ASSERT_CLIENT_RAN(run);
  EXPECT_EQ(number(run.output, "pending"), 1u);
  EXPECT_EQ(cupti_at(run.trace, EventKind::kAlloc, kAtExitAddress).size(), 1u);
  EXPECT_TRUE(run.trace.meta.clean_end);
}

// ---- without a working CUPTI --------------------------------------------------------------

std::vector<std::string> stderr_lines(const ClientRun& run) {
  std::vector<std::string> lines;
  std::istringstream in(run.stderr_text);
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("peakscope: ", 0) == 0) lines.push_back(line);
  return lines;
}

// What holds whatever CUPTI does: the hooks record, device samples are taken.
void expect_hooks_and_samples(const ClientRun& run) {
  int hooked = 0;
  for (const Event& e : select(run.trace, EventKind::kAlloc, Api::kCudaMalloc))
    hooked += e.address == number(run.output, "hooked") && e.bytes == kHooked;
  EXPECT_EQ(hooked, 1);
  const std::vector<Event> used = counters(run.trace, "device_used_bytes");
  ASSERT_EQ(used.size(), 4u);
  EXPECT_EQ(used[0].bytes, number(run.output, "used_wave_push"));
  EXPECT_TRUE(run.trace.meta.clean_end);
}

nlohmann::json only_unavailable(const ClientRun& run) {
  const std::vector<Event> m = marks(run.trace, "cupti.unavailable");
  EXPECT_EQ(m.size(), 1u);
  EXPECT_TRUE(marks(run.trace, "cupti.on").empty());
  EXPECT_TRUE(select(run.trace, EventKind::kAlloc, Api::kCupti).empty());
  return m.empty() ? nlohmann::json() : payload(run.trace, m[0]);
}

TEST(CudaCuptiFallback, SubscriberSlotTakenKeepsTheHooksAndSaysSoOnce) {
  Scratch s;
  ClientRun run = run_client(s, client("cupti_client") + " basic",
                             with_cupti() + " PEAKSCOPE_QUIET=0 FAKE_CUPTI_SUBSCRIBER_TAKEN=nsys-2025.3");
  ASSERT_CLIENT_RAN(run);
  EXPECT_EQ(only_unavailable(run), nlohmann::json::parse(R"({"reason":"subscriber slot taken","tool":"nsys-2025.3"})"));
  const std::vector<std::string> said = stderr_lines(run);
  ASSERT_EQ(said.size(), 1u) << run.stderr_text;
  EXPECT_NE(said[0].find("nsys-2025.3"), std::string::npos) << said[0];
  expect_hooks_and_samples(run);
}

TEST(CudaCuptiFallback, WithoutSubscribeV2TheHolderIsUnnamed) {
  Scratch s;
  ClientRun run = run_client(s, client("cupti_client") + " basic",
                             with_cupti("cupti_old") + " FAKE_CUPTI_SUBSCRIBER_TAKEN=nsys-2025.3");
  ASSERT_CLIENT_RAN(run);
  EXPECT_EQ(only_unavailable(run)["reason"], "subscriber slot taken");
  expect_hooks_and_samples(run);
}

TEST(CudaCuptiFallback, AbsentCuptiChangesNothingElse) {
  Scratch s;
  ClientRun run = run_client(s, client("cupti_client") + " basic",
                             "PEAKSCOPE_QUIET=0 PEAKSCOPE_CUPTI_LIBRARY=" + s.path("no/libcupti.so.13"));
  ASSERT_CLIENT_RAN(run);
  EXPECT_EQ(number(run.output, "cupti_loaded"), 0u);
  EXPECT_EQ(only_unavailable(run)["reason"], "not found: " + s.path("no/libcupti.so.13"));
  EXPECT_TRUE(stderr_lines(run).empty()) << "auto mode does without CUPTI quietly:\n" << run.stderr_text;
  expect_hooks_and_samples(run);
}

TEST(CudaCuptiFallback, AbsentCuptiAskedForIsSaidOnStderr) {
  Scratch s;
  ClientRun run =
      run_client(s, client("cupti_client") + " basic",
                 "PEAKSCOPE_QUIET=0 PEAKSCOPE_CUPTI=1 PEAKSCOPE_CUPTI_LIBRARY=" + s.path("no/libcupti.so.13"));
  ASSERT_CLIENT_RAN(run);
  const std::vector<std::string> said = stderr_lines(run);
  ASSERT_EQ(said.size(), 1u) << run.stderr_text;
  EXPECT_NE(said[0].find("not found"), std::string::npos) << said[0];
  expect_hooks_and_samples(run);
}

TEST(CudaCuptiFallback, OffNeverLoadsCupti) {
  Scratch s;
  ClientRun run =
      run_client(s, client("cupti_client") + " basic", with_cupti() + cupti_counts(s) + " PEAKSCOPE_CUPTI=0");
  ASSERT_CLIENT_RAN(run);
  EXPECT_EQ(number(run.output, "cupti_loaded"), 0u);
  EXPECT_FALSE(fs::exists(s.path("cupti.counts"))) << "the double was never loaded";
  EXPECT_EQ(only_unavailable(run)["reason"], "PEAKSCOPE_CUPTI=0");
  expect_hooks_and_samples(run);
}

TEST(CudaCuptiFallback, AnotherMajorVersionIsRefused) {
  Scratch s;
  ClientRun run =
      run_client(s, client("cupti_client") + " basic", with_cupti() + cupti_counts(s) + " FAKE_CUPTI_VERSION=28");
  ASSERT_CLIENT_RAN(run);
  const nlohmann::json p = only_unavailable(run);
  EXPECT_NE(p["reason"].get<std::string>().find("version 28"), std::string::npos) << p;
  EXPECT_EQ(number(read_values(s.path("cupti.counts")), "subscribe_v2"), 0u) << "refused before subscribing";
  expect_hooks_and_samples(run);
}

TEST(CudaCuptiFallback, OlderCuptiFallsBackAndSaysSoInTheTrace) {
  Scratch s;
  ClientRun run = run_client(s, client("cupti_client") + " basic", with_cupti("cupti_old") + cupti_counts(s));
  ASSERT_CLIENT_RAN(run);
  const std::vector<Event> on = marks(run.trace, "cupti.on");
  ASSERT_EQ(on.size(), 1u);
  const nlohmann::json p = payload(run.trace, on[0]);
  EXPECT_EQ(p["subscribe"], "cuptiSubscribe");
  EXPECT_EQ(p["timestamps"], "offset");
  EXPECT_EQ(p["allocation_source"], false);
  const std::vector<Event> cublas = cupti_at(run.trace, EventKind::kAlloc, kCublasAddress);
  ASSERT_EQ(cublas.size(), 1u);
  EXPECT_EQ(run.trace.meta.string(cublas[0].name), "") << "no allocation source without the API";
  // CUPTI's own clock (CLOCK_REALTIME here), moved onto ours by the offset measured at start.
  constexpr uint64_t kSlack = 5000000;
  EXPECT_GE(cublas[0].time_ns + kSlack, number(run.output, "before_stamped"));
  EXPECT_LE(cublas[0].time_ns, number(run.output, "after_stamped") + kSlack);
  expect_hooks_and_samples(run);
}

}  // namespace
}  // namespace psc::cuda_test
