// The driver side: cuGetProcAddress and cudaGetDriverEntryPoint* answers are
// swapped for wrappers chosen by what the driver returned; programs linked
// against libcuda are recorded through our exports; VMM physical memory is
// counted from creation until its last reference and mapping are gone; dlsym
// keeps RTLD_NEXT relative to its real caller.
#include <set>

#include "tests/end_to_end/cuda/cuda_support.h"

namespace psc::cuda_test {
namespace {

// "rc status object symbol" as the clients print a lookup.
struct Lookup {
  int rc = -1, status = -1;
  std::string object, symbol;
};
Lookup lookup(const Values& v, const std::string& key) {
  Lookup l;
  auto it = v.find(key);
  if (it == v.end()) return l;
  std::istringstream in(it->second);
  in >> l.rc >> l.status >> l.object >> l.symbol;
  return l;
}

void expect_lookup(const Values& v, const std::string& key, int rc, int status, const std::string& object,
                   const std::string& symbol) {
  const Lookup l = lookup(v, key);
  EXPECT_EQ(l.rc, rc) << key;
  EXPECT_EQ(l.status, status) << key;
  EXPECT_EQ(l.object, object) << key;
  EXPECT_EQ(l.symbol, symbol) << key;
}

const std::string kPreload = "libpeakscope_preload.so";
const std::string kDriver = "libcuda.so.1";

TEST(CudaDriver, LookupsHandOutTheWrapperOfWhatTheDriverReturned) {
  Scratch s;
  ClientRun run = run_client(s, client("vmm_client") + " lookup");
  ASSERT_CLIENT_RAN(run);
  const Values& v = run.output;
  expect_lookup(v, "alloc", 0, 0, kPreload, "cuMemAlloc_v2");
  expect_lookup(v, "free", 0, 0, kPreload, "cuMemFree_v2");
  // CUDA 3.0 asks for the 32-bit ABI: the driver's own function, not our _v2 wrapper.
  expect_lookup(v, "alloc_v1", 0, 0, kDriver, "cuMemAlloc");
  expect_lookup(v, "free_v1", 0, 0, kDriver, "cuMemFree");
  expect_lookup(v, "async_ptsz", 0, 0, kPreload, "cuMemAllocAsync_ptsz");
  expect_lookup(v, "free_async_ptsz", 0, 0, kPreload, "cuMemFreeAsync_ptsz");
  expect_lookup(v, "create_too_old", 0, 2, "null", "-");  // CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT
  expect_lookup(v, "unknown", 0, 1, "null", "-");         // CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND
  expect_lookup(v, "too_new", 1, 0, "untouched", "-");    // CUDA_ERROR_INVALID_VALUE, pointer left alone
  expect_lookup(v, "get_proc_v1", 0, 0, kPreload, "cuGetProcAddress");
  expect_lookup(v, "managed_via_v1", 0, 0, kPreload, "cuMemAllocManaged");

  std::vector<Event> allocs = select(run.trace, EventKind::kAlloc, Api::kCuMemAlloc);
  ASSERT_EQ(allocs.size(), 1u) << "the v1 allocation goes unseen: its ABI is not hooked";
  EXPECT_EQ(allocs[0].bytes, 424242u);
  EXPECT_FALSE(nested(allocs[0]));
  EXPECT_EQ(number(run.driver, "cuMemAlloc.calls"), 1u);
  std::vector<Event> async = select(run.trace, EventKind::kAlloc, Api::kCuMemAllocAsync);
  ASSERT_EQ(async.size(), 1u);
  EXPECT_EQ(async[0].bytes, 313131u);
  EXPECT_EQ(async[0].stream, 2u) << "stream 0 of a _ptsz call is the per-thread stream";
  EXPECT_EQ(number(run.driver, "cuMemAllocAsync_ptsz.calls"), 1u);
  EXPECT_EQ(number(run.driver, "cuMemAllocAsync.calls"), 0u);
  std::set<std::string> unwrapped;
  for (const Event& e : run.trace.events)
    if (e.kind == EventKind::kMark && run.trace.meta.string(e.name) == "peakscope/unwrapped_driver_entry")
      unwrapped.insert(std::string(run.trace.meta.string(e.payload)));
  EXPECT_EQ(unwrapped, (std::set<std::string>{R"({"symbol":"cuMemAlloc"})", R"({"symbol":"cuMemFree"})"}))
      << "the trace says which lookups of hooked functions returned something we could not wrap";
}

TEST(CudaDriver, WithoutTheRecorderTheSameLookupsReturnTheDriversFunctions) {
  Scratch s;
  ClientRun run = run_client(s, client("vmm_client") + " lookup", "", false);
  ASSERT_CLIENT_RAN(run);
  expect_lookup(run.output, "alloc", 0, 0, kDriver, "cuMemAlloc_v2");
  expect_lookup(run.output, "async_ptsz", 0, 0, kDriver, "cuMemAllocAsync_ptsz");
}

TEST(CudaDriver, RuntimeEntryPointLookupsAreWrappedToo) {
  Scratch s;
  ClientRun run = run_client(s, client("torch_style_client") + " lookups");
  ASSERT_CLIENT_RAN(run);
  const Values& v = run.output;
  expect_lookup(v, "alloc_default", 0, 0, kPreload, "cuMemAlloc_v2");
  expect_lookup(v, "alloc_async_per_thread", 0, 0, kPreload, "cuMemAllocAsync_ptsz");
  expect_lookup(v, "alloc_async_legacy", 0, 0, kPreload, "cuMemAllocAsync");
  expect_lookup(v, "free_async_ptsz_default", 0, 0, kPreload, "cuMemFreeAsync_ptsz");
  expect_lookup(v, "alloc_v1", 0, 0, kDriver, "cuMemAlloc");
  expect_lookup(v, "create_too_old", 0, 2, "null", "-");
  expect_lookup(v, "unknown", 0, 1, "null", "-");
  EXPECT_EQ(lookup(v, "too_new").rc, 1);  // cudaErrorInvalidValue
  expect_lookup(v, "get_proc_address", 0, 0, kPreload, "cuGetProcAddress_v2");
  expect_lookup(v, "free_via_lookup", 0, 0, kPreload, "cuMemFree_v2");
  EXPECT_EQ(number(run.runtime, "cudaGetDriverEntryPoint_ptsz.calls"), 1u);
  EXPECT_EQ(number(run.runtime, "cudaGetDriverEntryPointByVersion.calls"), 7u);
}

TEST(CudaDriver, DirectlyLinkedDriverCallsAreRecordedThroughOurExports) {
  Scratch s;
  ClientRun run = run_client(s, client("vmm_client") + " direct");
  ASSERT_CLIENT_RAN(run);
  struct Want {
    Api api;
    MemoryKind memory;
    uint64_t bytes;
    int16_t device;
  };
  const Want wants[] = {
      {Api::kCuMemAlloc, MemoryKind::kDevice, 777777, 0},
      {Api::kCuMemAllocManaged, MemoryKind::kManaged, 888888, 0},
      {Api::kCuMemAllocHost, MemoryKind::kPinnedHost, 99999, -1},
      {Api::kCuMemHostAlloc, MemoryKind::kPinnedHost, 111111, -1},
      {Api::kCuMemHostRegister, MemoryKind::kRegisteredHost, 1 << 16, -1},
      {Api::kCuMemAllocAsync, MemoryKind::kPool, 123456, 0},
  };
  for (const Want& w : wants) {
    int allocs = 0, frees = 0;
    uint64_t address = 0;
    for (const Event& e : run.trace.events) {
      if (e.kind == EventKind::kAlloc && e.bytes == w.bytes) {
        ++allocs;
        address = e.address;
        EXPECT_EQ(e.api, w.api) << w.bytes;
        EXPECT_EQ(e.memory, w.memory) << w.bytes;
        EXPECT_EQ(e.device, w.device) << w.bytes;
        EXPECT_FALSE(nested(e));
      }
    }
    for (const Event& e : run.trace.events) {
      if (e.kind == EventKind::kFree && e.address == address) {
        ++frees;
        EXPECT_EQ(e.bytes, w.bytes);
        EXPECT_EQ(e.memory, w.memory);
      }
    }
    EXPECT_EQ(allocs, 1) << w.bytes;
    EXPECT_EQ(frees, 1) << w.bytes;
  }
  EXPECT_EQ(select(run.trace, EventKind::kAlloc, Api::kCuMemAllocAsync)[0].stream, number(run.output, "stream"));
  EXPECT_EQ(replay(run.trace).peak, number(run.driver, "peak_bytes"));
  EXPECT_EQ(replay(run.trace).allocated, number(run.driver, "allocated_bytes"));
}

TEST(CudaDriver, PointersTheDriverHandsOutUnexportedAreLeftAloneAndReported) {
  Scratch s;
  ClientRun run = run_client(s, client("cudart_client") + " mix", "FAKE_CUDA_HIDDEN_ENTRY=1");
  ASSERT_CLIENT_RAN(run);
  EXPECT_TRUE(select(run.trace, EventKind::kAlloc, Api::kCuMemAlloc).empty())
      << "the runtime's cuMemAlloc came from a pointer we cannot identify: not wrapped";
  ASSERT_EQ(select(run.trace, EventKind::kAlloc, Api::kCudaMalloc).size(), 1u) << "the runtime hook still sees it";
  EXPECT_EQ(number(run.driver, "cuMemAlloc_v2.calls"), 1u) << "and the call reached the driver";
  int marks = 0;
  for (const Event& e : run.trace.events)
    marks += e.kind == EventKind::kMark && run.trace.meta.string(e.name) == "peakscope/unwrapped_driver_entry";
  EXPECT_EQ(marks, 2) << "cuMemAlloc and cuMemFree";
  EXPECT_EQ(replay(run.trace).peak, number(run.driver, "peak_bytes"));
}

TEST(CudaDlsym, RtldNextStaysRelativeToTheRealCaller) {
  Scratch s;
  ClientRun run =
      run_client(s, client("cudart_client") + " ranges", "LD_PRELOAD=" + preload() + ":" + client("libnext_probe.so"));
  ASSERT_CLIENT_RAN(run);
  EXPECT_EQ(run.output["probe_next"], "libcudart.so.13");
  EXPECT_EQ(run.output.count("probe_recursed"), 0u);
  EXPECT_EQ(select(run.trace, EventKind::kAlloc, Api::kCudaMalloc).size(), 3u)
      << "peakscope, first in line, records; the probe after it forwards";
  EXPECT_EQ(number(run.runtime, "cudaMalloc.calls"), 3u);
}

TEST(CudaVmm, PhysicalMemoryLivesUntilItsLastReferenceAndMappingAreGone) {
  Scratch s;
  ClientRun run = run_client(s, client("vmm_client") + " nccl");
  ASSERT_CLIENT_RAN(run);
  const uint64_t a = number(run.output, "handle_a"), b = number(run.output, "handle_b");
  std::map<uint64_t, std::string> freed_in;
  std::map<uint64_t, Api> freed_by;
  int creates = 0, maps = 0, unmaps = 0;
  for (const Event& e : run.trace.events) {
    if (e.kind == EventKind::kAlloc) {
      ++creates;
      EXPECT_EQ(e.api, Api::kCuMemCreate);
      EXPECT_EQ(e.memory, MemoryKind::kVmmPhysical);
      EXPECT_EQ(e.bytes, 4u << 20);
      EXPECT_EQ(e.device, 1);
      EXPECT_TRUE(e.address == a || e.address == b);
    } else if (e.kind == EventKind::kFree) {
      freed_in[e.address] = std::string(run.trace.meta.string(e.range));
      freed_by[e.address] = e.api;
      EXPECT_EQ(e.bytes, 4u << 20);
      EXPECT_EQ(e.device, 1);
    }
    maps += e.kind == EventKind::kMap;
    unmaps += e.kind == EventKind::kUnmap;
  }
  EXPECT_EQ(creates, 2);
  EXPECT_EQ(maps, 2);
  EXPECT_EQ(unmaps, 2);
  EXPECT_EQ(freed_in[b], "released");
  EXPECT_EQ(freed_by[b], Api::kCuMemRelease);
  EXPECT_EQ(freed_in[a], "unmapped") << "released while mapped: the memory stays until the unmap";
  EXPECT_EQ(freed_by[a], Api::kCuMemUnmap);
  const Replay r = replay(run.trace);
  EXPECT_EQ(r.peak, 8u << 20) << "the 16 MiB reservation is address space, not memory";
  EXPECT_EQ(r.peak, number(run.driver, "peak_bytes"));
  EXPECT_EQ(number(run.driver, "cuMemAddressReserve.bytes"), 16u << 20);
  EXPECT_EQ(number(run.driver, "vmm_physical_frees"), 2u);
}

TEST(CudaVmm, ExpandableSegmentsThroughRuntimeEntryPointsAreCountedOnce) {
  Scratch s;
  ClientRun run = run_client(s, client("torch_style_client") + " expandable");
  ASSERT_CLIENT_RAN(run);
  EXPECT_EQ(select(run.trace, EventKind::kAlloc, Api::kCuMemCreate).size(), 8u);
  EXPECT_EQ(select(run.trace, EventKind::kMap, Api::kCuMemMap).size(), 8u);
  EXPECT_EQ(select(run.trace, EventKind::kUnmap, Api::kCuMemUnmap).size(), 5u) << "four single, one over four";
  const Replay r = replay(run.trace);
  EXPECT_EQ(r.allocs, 8u);
  EXPECT_EQ(r.frees, 8u);
  EXPECT_EQ(r.live, 0u);
  EXPECT_EQ(r.peak, number(run.output, "peak_mapped"));
  EXPECT_EQ(r.peak, number(run.driver, "peak_bytes"));
  EXPECT_EQ(number(run.driver, "cuMemCreate.calls"), 8u);
}

}  // namespace
}  // namespace psc::cuda_test
