// The nvcc-built reference workload (workloads/cuda/lora_workload.cu): its math on the
// host, and its real loading path (fat binary registration, kernel launches
// through the runtime) against the test doubles under the recorder.
#include "tests/end_to_end/cuda/cuda_support.h"

namespace psc::cuda_test {
namespace {

std::string workload() { return build_dir() + "/workloads/cuda/lora_workload"; }

#define SKIP_WITHOUT_WORKLOAD() \
  if (!fs::exists(workload())) GTEST_SKIP() << workload() << " not built (no nvcc at $(NVCC)?)"

TEST(CudaKernels, TheWorkloadsGradientsMatchFiniteDifferencesOnTheHost) {
  SKIP_WITHOUT_WORKLOAD();
  Scratch s;
  ClientRun run =
      run_client(s, workload() + " --device cpu --gradcheck --tokens 8 --dim 16 --rank 4 --layers 3", "", false);
  ASSERT_CLIENT_RAN(run);
  EXPECT_LT(std::stod(run.output["gradcheck_worst_relative_error"]), 2e-2);
}

TEST(CudaKernels, TrainingOnTheHostLowersTheLoss) {
  SKIP_WITHOUT_WORKLOAD();
  Scratch s;
  ClientRun run = run_client(s, workload() + " --device cpu --steps 3", "", false);
  ASSERT_CLIENT_RAN(run);
  const double first = std::stod(run.output["loss_step0"]), last = std::stod(run.output["loss_step2"]);
  EXPECT_GT(first, 0.0);
  EXPECT_LT(last, first);
  EXPECT_EQ(number(run.output, "workload_live_bytes_at_exit"), 0u);
}

class CudaKernelsOnDoubles : public testing::TestWithParam<const char*> {};

TEST_P(CudaKernelsOnDoubles, LaunchesRunAndThePeakIsTheWorkloadsOwn) {
  SKIP_WITHOUT_WORKLOAD();
  Scratch s;
  const std::string alloc = GetParam();
  ClientRun run = run_client(s, workload() + " --annotate psc --alloc " + alloc);
  ASSERT_CLIENT_RAN(run);
  // nvcc's registration and launch path went through the runtime.
  EXPECT_EQ(number(run.runtime, "fatbins"), 1u);
  EXPECT_EQ(number(run.runtime, "bad_fatbins"), 0u);
  EXPECT_EQ(number(run.runtime, "functions"), 5u);
  EXPECT_EQ(number(run.runtime, "bad_launches"), 0u);
  EXPECT_GT(number(run.output, "kernel_launches"), 0u);
  EXPECT_EQ(number(run.runtime, "launches"), number(run.output, "kernel_launches"));
  // Every buffer the workload allocated, once, and the peak it counted itself.
  const Replay r = replay(run.trace);
  EXPECT_EQ(r.allocs, number(run.output, "allocations"));
  EXPECT_EQ(r.frees, r.allocs);
  EXPECT_EQ(r.peak, number(run.output, "workload_peak_bytes"));
  EXPECT_EQ(r.peak, number(run.driver, "peak_bytes"));
  const Api api = alloc == "async" ? Api::kCudaMallocAsync : Api::kCudaMalloc;
  EXPECT_EQ(select(run.trace, EventKind::kAlloc, api).size(), r.allocs);
  // Attribution: the workload's ranges hold its allocations.
  std::map<std::string, int> allocs_in;
  int waves = 0;
  for (const Event& e : run.trace.events) {
    if (e.kind == EventKind::kAlloc && !nested(e)) ++allocs_in[std::string(run.trace.meta.string(e.range))];
    if (e.kind == EventKind::kMark && run.trace.meta.string(e.name) == "wave") {
      const std::string payload(run.trace.meta.string(e.payload));
      EXPECT_NE(payload.find(waves == 0 ? "\"cold\": true" : "\"cold\": false"), std::string::npos) << payload;
      ++waves;
    }
  }
  EXPECT_EQ(waves, 2);
  EXPECT_EQ(allocs_in["forward/layer.0"], 2 * 3) << "u, h and the output, per step";
  EXPECT_EQ(allocs_in["recompute/layer.3"], 2 * 2);
  EXPECT_EQ(allocs_in["backward/layer.3"], 2 * 5);
  EXPECT_EQ(allocs_in["head/loss"], 2);
  EXPECT_EQ(allocs_in[""], 14) << "weights, adapters, input and target of 4 layers";
}

INSTANTIATE_TEST_SUITE_P(CudaWorkload, CudaKernelsOnDoubles, testing::Values("malloc", "async"));

}  // namespace
}  // namespace psc::cuda_test
