// The CUDA runtime hooks through their real loading path: clients linked
// against libcudart.so.13 (versioned references) run under LD_PRELOAD against
// the test doubles, and every event is checked against what the client did
// and against the doubles' own counts.
#include <algorithm>
#include <set>

#include "tests/end_to_end/cuda/cuda_support.h"

namespace psc::cuda_test {
namespace {

struct Expected {
  Api api;
  MemoryKind memory;
  uint64_t bytes;
  const char* key;  // the client's name for the address
  int16_t device;
  int64_t stream;  // -1: the client's stream
  Api driver_api;  // the nested driver call the runtime makes
};

TEST(CudaRuntime, EveryRuntimeAllocationIsRecordedOnceWithSizeKindDeviceAndStream) {
  Scratch s;
  ClientRun run = run_client(s, client("cudart_client") + " mix");
  ASSERT_CLIENT_RAN(run);
  ASSERT_TRUE(run.trace.meta.clean_end);
  EXPECT_EQ(run.trace.meta.dropped_total(), 0u);
  const uint64_t stream = number(run.output, "stream");
  const Expected expected[] = {
      {Api::kCudaMalloc, MemoryKind::kDevice, 1048577, "device", 0, 0, Api::kCuMemAlloc},
      {Api::kCudaMallocManaged, MemoryKind::kManaged, 3u << 20, "managed", 0, 0, Api::kCuMemAllocManaged},
      {Api::kCudaMallocHost, MemoryKind::kPinnedHost, 65536, "host", -1, 0, Api::kCuMemAllocHost},
      {Api::kCudaHostAlloc, MemoryKind::kPinnedHost, 131072, "host_alloc", -1, 0, Api::kCuMemHostAlloc},
      {Api::kCudaHostRegister, MemoryKind::kRegisteredHost, 262144, "registered", -1, 0, Api::kCuMemHostRegister},
      {Api::kCudaMallocAsync, MemoryKind::kPool, 5u << 20, "async", 0, -1, Api::kCuMemAllocAsync},
      {Api::kCudaMallocAsync, MemoryKind::kPool, 6u << 20, "async_ptsz", 0, 2, Api::kCuMemAllocAsync},
      {Api::kCudaMallocFromPoolAsync, MemoryKind::kPool, 7u << 20, "pooled", 0, -1, Api::kCuMemAllocFromPoolAsync},
      {Api::kCudaMallocFromPoolAsync, MemoryKind::kPool, 8u << 20, "pooled_ptsz", 0, 2, Api::kCuMemAllocFromPoolAsync},
  };
  for (const Expected& x : expected) {
    SCOPED_TRACE(x.key);
    const uint64_t address = number(run.output, x.key);
    ASSERT_NE(address, 0u);
    const uint64_t want_stream = x.stream < 0 ? stream : static_cast<uint64_t>(x.stream);
    int outer_allocs = 0, outer_frees = 0, inner_allocs = 0, inner_frees = 0;
    uint64_t outer_seq = 0, inner_seq = 0;
    for (const Event& e : run.trace.events) {
      if (e.address != address || !is_memory_event(e.kind)) continue;
      EXPECT_EQ(e.bytes, x.bytes) << api_name(e.api);
      EXPECT_EQ(e.memory, x.memory) << api_name(e.api);
      EXPECT_EQ(e.device, x.device) << api_name(e.api);
      if (e.kind == EventKind::kAlloc && !nested(e)) {
        ++outer_allocs;
        outer_seq = e.seq;
        EXPECT_EQ(e.api, x.api);
        EXPECT_EQ(e.stream, want_stream);
      } else if (e.kind == EventKind::kAlloc) {
        ++inner_allocs;
        inner_seq = e.seq;
        EXPECT_EQ(e.api, x.driver_api);
      } else if (!nested(e)) {
        ++outer_frees;
        if (x.memory == MemoryKind::kPool) {
          EXPECT_EQ(e.stream, want_stream);
        }
      } else {
        ++inner_frees;
      }
    }
    EXPECT_EQ(outer_allocs, 1);
    EXPECT_EQ(outer_frees, 1);
    EXPECT_EQ(inner_allocs, 1) << "the runtime's driver call, flagged nested";
    EXPECT_EQ(inner_frees, 1);
    EXPECT_LT(inner_seq, outer_seq) << "the driver call returns before the runtime call does";
  }
  // The doubles agree: every byte the driver handed out is in the trace once.
  const Replay r = replay(run.trace);
  EXPECT_EQ(r.allocs, 8u);
  EXPECT_EQ(r.peak, number(run.driver, "peak_bytes"));
  EXPECT_EQ(r.allocated, number(run.driver, "allocated_bytes"));
  EXPECT_EQ(r.live, 0u);
  EXPECT_EQ(number(run.driver, "live_bytes"), 0u);
  EXPECT_EQ(select(run.trace, EventKind::kAlloc, Api::kCuMemAlloc).size(), number(run.driver, "cuMemAlloc_v2.calls"));
  EXPECT_EQ(select(run.trace, EventKind::kAlloc, Api::kCudaMalloc)[0].bytes, number(run.runtime, "cudaMalloc.bytes"));
  EXPECT_EQ(number(run.runtime, "cudaMalloc.calls"), 2u) << "cudaMalloc(0) reached the runtime but is no memory";
  EXPECT_EQ(number(run.driver, "cuMemAllocAsync_ptsz.calls"), 1u) << "the _ptsz hook forwards to the _ptsz runtime";
  EXPECT_EQ(number(run.driver, "cuMemAllocFromPoolAsync_ptsz.calls"), 1u);
  EXPECT_EQ(number(run.driver, "bad_frees"), 0u) << "every free reached the double with the right pointer";
}

TEST(CudaRuntime, TheDoublesSeeTheSameCallsWithoutTheRecorder) {
  Scratch s;
  ClientRun run = run_client(s, client("cudart_client") + " mix", "", false);
  ASSERT_CLIENT_RAN(run);
  EXPECT_EQ(number(run.driver, "cuMemAlloc_v2.calls"), 1u);
  EXPECT_EQ(number(run.driver, "allocated_bytes"), 1048577u + (3u << 20) + 65536 + 131072 + (26u << 20));
  EXPECT_EQ(number(run.driver, "bad_frees"), 0u);
}

TEST(CudaRuntime, ARuntimeLoadedPrivatelyIsFoundAndForwardedTo) {
  Scratch s;
  ClientRun run = run_client(s, client("local_client") + " " + client("liblocal_runtime.so") + " 987654");
  ASSERT_CLIENT_RAN(run);
  EXPECT_EQ(number(run.output, "runtime_in_global_scope"), 0u)
      << "the scenario needs the runtime out of RTLD_NEXT's reach";
  std::vector<Event> mallocs = select(run.trace, EventKind::kAlloc, Api::kCudaMalloc);
  ASSERT_EQ(mallocs.size(), 1u);
  EXPECT_EQ(mallocs[0].bytes, 987654u);
  EXPECT_EQ(select(run.trace, EventKind::kFree, Api::kCudaFree).size(), 1u);
  EXPECT_EQ(number(run.runtime, "cudaMalloc.calls"), 1u);
  EXPECT_EQ(replay(run.trace).peak, number(run.driver, "peak_bytes"));
}

TEST(CudaRuntime, AFailedAllocationIsFlaggedAndHoldsNothing) {
  Scratch s;
  ClientRun run = run_client(s, client("cudart_client") + " oom", "FAKE_CUDA_DEVICE_BYTES=1000000");
  ASSERT_CLIENT_RAN(run);
  EXPECT_EQ(number(run.output, "oom_error"), 2u);  // cudaErrorMemoryAllocation
  std::vector<Event> mallocs = select(run.trace, EventKind::kAlloc, Api::kCudaMalloc);
  ASSERT_EQ(mallocs.size(), 2u);
  EXPECT_TRUE(failed(mallocs[0]));
  EXPECT_EQ(mallocs[0].bytes, uint64_t{1} << 40);
  EXPECT_EQ(mallocs[0].address, 0u);
  EXPECT_FALSE(failed(mallocs[1]));
  std::vector<Event> driver = select(run.trace, EventKind::kAlloc, Api::kCuMemAlloc);
  ASSERT_EQ(driver.size(), 2u);
  EXPECT_TRUE(failed(driver[0]) && nested(driver[0]));
  EXPECT_EQ(replay(run.trace).peak, 4096u);
  EXPECT_EQ(number(run.driver, "failed_allocs"), 1u);
}

TEST(CudaRuntime, RangesAndDevicesFollowEachAllocationAndItsFree) {
  Scratch s;
  ClientRun run = run_client(s, client("cudart_client") + " ranges");
  ASSERT_CLIENT_RAN(run);
  std::map<uint64_t, std::string> alloc_range, free_range;
  std::map<uint64_t, int16_t> alloc_device, free_device;
  std::map<uint64_t, uint64_t> size_at;
  for (const Event& e : run.trace.events) {
    if (nested(e) || !is_memory_event(e.kind)) continue;
    if (e.kind == EventKind::kAlloc) {
      size_at[e.address] = e.bytes;
      alloc_range[e.bytes] = std::string(run.trace.meta.string(e.range));
      alloc_device[e.bytes] = e.device;
    } else {
      free_range[size_at[e.address]] = std::string(run.trace.meta.string(e.range));
      free_device[size_at[e.address]] = e.device;
      EXPECT_EQ(e.bytes, size_at[e.address]);
    }
  }
  EXPECT_EQ(alloc_range[100000], "forward/layer.0");
  EXPECT_EQ(alloc_range[200000], "backward/layer.0");
  EXPECT_EQ(free_range[100000], "forward/layer.0");
  EXPECT_EQ(alloc_range[300000], "");
  EXPECT_EQ(alloc_device[100000], 0);
  EXPECT_EQ(alloc_device[300000], 1);
  EXPECT_EQ(free_device[300000], 1) << "freed while device 0 was current: still device 1's memory";
  EXPECT_EQ(replay(run.trace).peak, 500000u);
}

// The counter event the recorder writes right after the range event `seq` on the same thread.
const Event* counter_after(const LoadedTrace& t, size_t index, std::string_view name) {
  for (size_t i = index + 1; i < t.events.size(); ++i) {
    const Event& e = t.events[i];
    if (e.thread != t.events[index].thread) continue;
    if (e.kind == EventKind::kCounter && t.meta.string(e.name) == name) return &e;
    if (e.kind != EventKind::kCounter) return nullptr;
  }
  return nullptr;
}

TEST(CudaPools, ReservedBytesAreSampledAtRangeBoundariesWhenTheyChange) {
  Scratch s;
  ClientRun run = run_client(s, client("cudart_client") + " pool");
  ASSERT_CLIENT_RAN(run);
  // The double's model: 2 MiB chunks, given back at a synchronisation (threshold 0).
  ASSERT_EQ(number(run.output, "reserved_after_push_b"), 4u << 20);
  ASSERT_EQ(number(run.output, "reserved_after_pop_b"), 8u << 20);
  ASSERT_EQ(number(run.output, "reserved_after_pop_a"), 0u);
  std::vector<uint64_t> device_samples;
  std::vector<std::string> where;
  const auto& t = run.trace;
  for (size_t i = 0; i < t.events.size(); ++i) {
    const Event& e = t.events[i];
    if (e.kind != EventKind::kRangePush && e.kind != EventKind::kRangePop) continue;
    if (const Event* c = counter_after(t, i, "pool_reserved_bytes")) {
      device_samples.push_back(c->bytes);
      EXPECT_EQ(c->device, 0);
      where.push_back(std::string(e.kind == EventKind::kRangePush ? "push " : "pop ") +
                      std::string(t.meta.string(e.name)));
    }
  }
  EXPECT_EQ(device_samples, (std::vector<uint64_t>{4u << 20, 8u << 20, 0}));
  EXPECT_EQ(where, (std::vector<std::string>{"push phase.b", "pop phase.b", "pop phase.a"}))
      << "one sample per boundary at which the value changed; none before the first pool allocation";
  char name[64];
  std::snprintf(name, sizeof name, "pool_reserved_bytes:0x%016llx",
                static_cast<unsigned long long>(number(run.output, "own_pool")));
  std::vector<uint64_t> own;
  for (const Event& e : t.events)
    if (e.kind == EventKind::kCounter && t.meta.string(e.name) == name) own.push_back(e.bytes);
  ASSERT_EQ(number(run.output, "own_reserved_after_push_c"), 2u << 20);
  EXPECT_EQ(own, (std::vector<uint64_t>{2u << 20, 0}))
      << "the explicit pool is sampled under its own name, and once destroyed holds nothing";
  // An explicit pool made the device's current one: under its own name only
  // (the device counter above saw nothing new at phase.e).
  std::snprintf(name, sizeof name, "pool_reserved_bytes:0x%016llx",
                static_cast<unsigned long long>(number(run.output, "current_pool")));
  std::vector<uint64_t> current;
  for (const Event& e : t.events)
    if (e.kind == EventKind::kCounter && t.meta.string(e.name) == name) current.push_back(e.bytes);
  ASSERT_FALSE(current.empty());
  EXPECT_EQ(current.front(), number(run.output, "current_reserved_after_push_e"));
  EXPECT_GT(current.front(), 0u);
}

TEST(CudaThreads, EachThreadsAllocationsKeepTheirDeviceStreamAndRange) {
  Scratch s;
  constexpr int kThreads = 8, kRounds = 50;
  ClientRun run = run_client(s, client("threads_client") + " 8 50");
  ASSERT_CLIENT_RAN(run);
  EXPECT_EQ(run.trace.meta.dropped_total(), 0u);
  std::map<int, uint32_t> trace_thread;
  int seen = 0;
  for (const Event& e : run.trace.events) {
    if (e.kind != EventKind::kAlloc || nested(e)) continue;
    const bool async = e.api == Api::kCudaMallocAsync;
    const uint64_t tag = async ? e.bytes - (2u << 20) : e.bytes;
    const int t = static_cast<int>((tag - 1) / 1000);
    ASSERT_LT(t, kThreads);
    ++seen;
    EXPECT_EQ(e.device, t % 2);
    EXPECT_EQ(run.trace.meta.string(e.range), "thread." + std::to_string(t));
    if (async) {
      EXPECT_EQ(e.stream, number(run.output, "stream." + std::to_string(t)));
    }
    if (!trace_thread.count(t)) trace_thread[t] = e.thread;
    EXPECT_EQ(e.thread, trace_thread[t]);
  }
  EXPECT_EQ(seen, 2 * kThreads * kRounds);
  EXPECT_EQ(trace_thread.size(), static_cast<size_t>(kThreads));
  EXPECT_EQ(select(run.trace, EventKind::kAlloc, Api::kCuMemAlloc).size(), number(run.driver, "cuMemAlloc_v2.calls"));
  EXPECT_EQ(select(run.trace, EventKind::kAlloc, Api::kCuMemAllocAsync).size(),
            number(run.driver, "cuMemAllocAsync.calls"));
  EXPECT_EQ(replay(run.trace).allocated, number(run.driver, "allocated_bytes"));
  EXPECT_EQ(replay(run.trace).live, 0u);
}

TEST(CudaFork, ParentAndChildEachRecordTheirOwnAllocations) {
  Scratch s;
  ClientRun run = run_client(s, client("fork_client"));
  ASSERT_CLIENT_RAN(run);
  const std::string child = std::to_string(number(run.output, "child"));
  auto sizes = [](const LoadedTrace& t) {
    std::set<uint64_t> out;
    for (const Event& e : t.events)
      if (e.kind == EventKind::kAlloc && !nested(e)) out.insert(e.bytes);
    return out;
  };
  EXPECT_EQ(sizes(run.trace), (std::set<uint64_t>{1111111, 4096}));
  std::string child_trace;
  for (const auto& entry : fs::directory_iterator(s.path("")))
    if (entry.path().filename().string().find(".p" + child) != std::string::npos) child_trace = entry.path();
  ASSERT_FALSE(child_trace.empty()) << "the child writes its own trace";
  const LoadedTrace t = load_trace(child_trace);
  EXPECT_TRUE(t.meta.clean_end);
  EXPECT_EQ(sizes(t), (std::set<uint64_t>{2222222, 4096}));
  EXPECT_EQ(number(run.driver, "cuMemAlloc_v2.bytes"), 1111111u);
  const Values child_driver = read_values(s.path("driver.counts." + child));
  EXPECT_EQ(number(child_driver, "cuMemAlloc_v2.bytes"), 2222222u);
  EXPECT_EQ(replay(t).peak, number(child_driver, "peak_bytes"));
  EXPECT_EQ(replay(run.trace).peak, number(run.driver, "peak_bytes"));
}

}  // namespace
}  // namespace psc::cuda_test
