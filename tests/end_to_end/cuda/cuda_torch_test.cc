// The PyTorch pluggable-allocator entry points, called the way
// torch.cuda.memory.CUDAPluggableAllocator calls them (the library opened by
// path, the two functions looked up by name, PyTorch's signatures).
#include <algorithm>

#include "tests/end_to_end/cuda/cuda_support.h"

namespace psc::cuda_test {
namespace {

TEST(CudaTorch, PluggableAllocatorRecordsEveryTensorOnItsStreamAndDevice) {
  Scratch s;
  ClientRun run = run_client(s, client("torch_style_client") + " pluggable " + preload());
  ASSERT_CLIENT_RAN(run);
  const uint64_t stream = number(run.output, "stream");
  const uint64_t sizes[] = {1 << 20, 3 << 20, 512 << 10, 2 << 20, 7 << 20};
  // What the client holds: each activation stays, its workspace (half) comes and goes.
  uint64_t expected_peak = 0, kept = 0;
  for (uint64_t size : sizes) {
    kept += size;
    expected_peak = std::max(expected_peak, kept + size / 2);
  }
  expected_peak = std::max(expected_peak, kept + (1 << 20));

  std::vector<Event> allocs = select(run.trace, EventKind::kAlloc, Api::kTorchPluggable);
  std::vector<Event> frees = select(run.trace, EventKind::kFree, Api::kTorchPluggable);
  ASSERT_EQ(allocs.size(), 11u) << "five activations, five workspaces, one on device 1; size 0 is no tensor";
  ASSERT_EQ(frees.size(), 11u);
  for (size_t i = 0; i < 5; ++i) {
    EXPECT_EQ(allocs[2 * i].bytes, sizes[i]);
    EXPECT_EQ(allocs[2 * i].stream, stream);
    EXPECT_EQ(allocs[2 * i + 1].bytes, sizes[i] / 2);
    EXPECT_EQ(allocs[2 * i + 1].stream, 0u);
  }
  for (size_t i = 0; i < allocs.size(); ++i) {
    EXPECT_EQ(allocs[i].memory, MemoryKind::kPool);
    EXPECT_FALSE(nested(allocs[i]));
    EXPECT_EQ(allocs[i].device, i < 10 ? 0 : 1) << "the last one: PyTorch named device 1 while device 0 was current";
  }
  for (const Event& e : frees) EXPECT_NE(e.bytes, 0u) << "a free carries its tensor's size";
  EXPECT_EQ(select(run.trace, EventKind::kAlloc, Api::kCuMemAllocAsync).size(), 11u)
      << "each tensor is one stream-ordered driver allocation, flagged nested";
  for (const Event& e : select(run.trace, EventKind::kAlloc, Api::kCuMemAllocAsync)) EXPECT_TRUE(nested(e));
  const Replay r = replay(run.trace);
  EXPECT_EQ(r.peak, expected_peak);
  EXPECT_EQ(r.peak, number(run.driver, "peak_bytes"));
  EXPECT_EQ(r.live, 0u);
  EXPECT_EQ(number(run.driver, "cuMemAllocAsync.calls"), 11u);
  EXPECT_EQ(number(run.output, "release_threshold"), ~0ull)
      << "the default pool keeps freed memory, as PyTorch's cudaMallocAsync backend sets it";
}

}  // namespace
}  // namespace psc::cuda_test
