// Device-level truth from CUPTI and device samples, with traces built here the
// way the recorder writes them: CUPTI's records are deferred (a late seq, an
// early time_ns, no range) and every CUPTI allocation is in the trace, those
// the hooks saw too. Each test states the answer by construction.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "analysis/analysis.h"
#include "analysis/device_usage.h"
#include "analysis/report_json.h"
#include "analysis/report_text.h"
#include "exchange/exporter.h"
#include "tests/support/synthetic_trace.h"
#include "tests/support/test_support.h"
#include "traces/deferred.h"

namespace psc {
namespace {

using test_support::TempTrace;
constexpr uint32_t kMain = 0;
constexpr uint32_t kWorker = 1;
constexpr uint32_t kCuptiThread = 2;  // the recorder's thread that drains CUPTI buffers

uint64_t cupti_group_bytes(const LiveBreakdown& live, const std::string& source, const std::string& range) {
  uint64_t total = 0;
  for (const LiveGroup& g : live.groups)
    if (g.cupti_only && g.source == source && g.range == range) total += g.bytes;
  return total;
}

// ---- placement and deduplication --------------------------------------------------

// A hooked cudaMalloc that CUPTI reports too, and a cuBLAS workspace only CUPTI
// saw, allocated while forward/layer.0 ran but learnt of after the wave.
void write_dedup_trace(const std::string& path, bool with_cupti) {
  SyntheticTrace t(path);
  t.wave_begin(kMain, R"({"tokens":8,"cold":true})");
  t.push(kMain, "forward/layer.0");
  const uint64_t call_start = t.now_ns() + 10;  // CUPTI stamps the call, the hook its return
  t.alloc(kMain, 0xA000, 4096);
  const uint64_t workspace_time = t.now_ns() + 500;
  t.alloc(kMain, 0xB000, 1000);
  t.free(kMain, 0xB000);
  t.free(kMain, 0xA000);
  const uint64_t free_end = t.now_ns() + 20;
  t.pop(kMain);
  t.wave_end(kMain);
  t.alloc(kMain, 0xD000, 10);  // after the wave, so the wave's end is not the trace's end
  if (with_cupti) {
    t.cupti_alloc(kCuptiThread, call_start, 0xA000, 4096, "libcudart.so.13");
    t.cupti_alloc(kCuptiThread, workspace_time, 0xC000, 65536, "libcublasLt.so.13");
    t.cupti_free(kCuptiThread, free_end, 0xA000);
  }
  t.close();
}

TEST(DeviceUsage, HookAndCuptiCountOnceAndCuptiOnlyIsAddedWithItsSource) {
  TempTrace trace("dedup");
  write_dedup_trace(trace.path, true);
  const Analysis a = analyze_trace(trace.path);
  ASSERT_NE(a.placement, nullptr);
  const PlacementCounts& c = a.placement->counts;
  EXPECT_EQ(c.cupti_allocs, 2u);
  EXPECT_EQ(c.deduplicated, 1u);
  EXPECT_EQ(c.cupti_only, 1u);
  EXPECT_EQ(c.cupti_only_bytes, 65536u);
  EXPECT_EQ(c.withheld, 2u);  // the duplicate's alloc and free
  // Hooked 0xA000, 0xB000, 0xD000 and the CUPTI-only workspace: never 0xA000 twice.
  EXPECT_EQ(a.memory.counts.allocs, 4u);
  EXPECT_EQ(a.memory.counts.replaced, 0u);
  EXPECT_EQ(a.memory.counts.unmatched_frees, 0u);
  // The workspace was live from inside forward/layer.0, so the wave peaks with it.
  EXPECT_EQ(a.peak.bytes, 4096u + 65536u + 1000u);
  ASSERT_EQ(a.waves.size(), 1u);
  EXPECT_EQ(a.waves[0].peak.bytes, 4096u + 65536u + 1000u);
  EXPECT_EQ(cupti_group_bytes(a.peak.live, "libcublasLt.so.13", "forward/layer.0"), 65536u);
  EXPECT_EQ(a.trace.missing_seqs, 0u);
  EXPECT_TRUE(a.warnings.empty()) << a.warnings[0];
  ASSERT_TRUE(a.device.present);
  ASSERT_EQ(a.device.cupti_only_by_source.size(), 1u);
  EXPECT_EQ(a.device.cupti_only_by_source[0].source, "libcublasLt.so.13");
  EXPECT_EQ(a.device.cupti_only_by_source[0].live_at_end_bytes, 65536u);
  ASSERT_EQ(a.device.waves.size(), 1u);
  EXPECT_EQ(a.device.waves[0].cupti_only_bytes, 65536u);

  const nlohmann::ordered_json j = analysis_to_json(a);
  bool found = false;
  for (const auto& g : j["live_at_peak"])
    if (g.contains("cupti_only")) {
      found = true;
      EXPECT_EQ(g["source"], "libcublasLt.so.13");
      EXPECT_EQ(g["range"], "forward/layer.0");
    }
  EXPECT_TRUE(found);
  EXPECT_EQ(j["device"]["cupti"]["deduplicated"], 1);
  const std::string text = render_analysis_text(a);
  EXPECT_NE(text.find("[CUPTI-only: libcublasLt.so.13]"), std::string::npos) << text;
  EXPECT_NE(text.find("1 also hooked (counted once)"), std::string::npos) << text;
}

TEST(DeviceUsage, DuplicatesOfEveryHookedAllocationLeaveTheReportUnchanged) {
  TempTrace plain("plain"), doubled("doubled");
  write_dedup_trace(plain.path, false);
  {
    // The same step; CUPTI reports each hooked allocation, and nothing else.
    SyntheticTrace t(doubled.path);
    t.wave_begin(kMain, R"({"tokens":8,"cold":true})");
    t.push(kMain, "forward/layer.0");
    const uint64_t a_start = t.now_ns() + 10;
    t.alloc(kMain, 0xA000, 4096);
    const uint64_t b_start = t.now_ns() + 10;
    t.alloc(kMain, 0xB000, 1000);
    t.free(kMain, 0xB000);
    const uint64_t b_end = t.now_ns() + 20;
    t.free(kMain, 0xA000);
    const uint64_t a_end = t.now_ns() + 20;
    t.pop(kMain);
    t.wave_end(kMain);
    const uint64_t d_start = t.now_ns() + 10;
    t.alloc(kMain, 0xD000, 10);
    t.cupti_alloc(kCuptiThread, a_start, 0xA000, 4096, "");
    t.cupti_alloc(kCuptiThread, b_start, 0xB000, 1000, "");
    t.cupti_free(kCuptiThread, b_end, 0xB000);
    t.cupti_free(kCuptiThread, a_end, 0xA000);
    t.cupti_alloc(kCuptiThread, d_start, 0xD000, 10, "");
    t.close();
  }
  const Analysis p = analyze_trace(plain.path);
  const Analysis d = analyze_trace(doubled.path);
  EXPECT_EQ(p.placement, nullptr);
  EXPECT_FALSE(p.device.present);
  ASSERT_NE(d.placement, nullptr);
  EXPECT_EQ(d.placement->counts.deduplicated, 3u);
  EXPECT_EQ(d.placement->counts.cupti_only, 0u);
  const auto pj = analysis_to_json(p), dj = analysis_to_json(d);
  EXPECT_FALSE(pj.contains("device"));
  for (const char* key : {"peak_bytes", "peak_time_ns", "peak_seq", "live_at_peak", "layers_at_peak", "waves"})
    EXPECT_EQ(pj[key], dj[key]) << key;
  EXPECT_EQ(pj["memory"]["allocs"], dj["memory"]["allocs"]);
  EXPECT_EQ(pj["memory"]["frees"], dj["memory"]["frees"]);
  EXPECT_EQ(dj["trace"]["missing_seqs"], 0);
}

TEST(DeviceUsage, ConflictingSizesAndUnpairedFreesAreWithheldAndCounted) {
  TempTrace trace("conflict");
  {
    SyntheticTrace t(trace.path);
    const uint64_t early = t.now_ns() + 5;  // before the hook recorded anything
    t.alloc(kMain, 0xA000, 4096);
    const uint64_t inside = t.now_ns() + 10;
    t.alloc(kMain, 0xB000, 100);
    t.free(kMain, 0xA000);
    t.cupti_free(kCuptiThread, early, 0xE000);                       // allocated before CUPTI attached
    t.cupti_alloc(kCuptiThread, inside, 0xA000, 8192, "libfoo.so");  // the same address at another size
    t.close();
  }
  const Analysis a = analyze_trace(trace.path);
  ASSERT_NE(a.placement, nullptr);
  EXPECT_EQ(a.placement->counts.conflicting, 1u);
  EXPECT_EQ(a.placement->counts.unpaired_frees, 1u);
  EXPECT_EQ(a.placement->counts.cupti_only, 0u);
  EXPECT_EQ(a.memory.counts.replaced, 0u);
  EXPECT_EQ(a.memory.counts.unmatched_frees, 0u);
  EXPECT_EQ(a.peak.bytes, 4096u + 100u);
  EXPECT_EQ(a.trace.missing_seqs, 0u);
}

// ---- placement by time --------------------------------------------------------------

TEST(DeviceUsage, DeferredAllocationIsLiveAtTheRightPeakInTheRangeOpenAtItsTime) {
  TempTrace trace("placement");
  {
    SyntheticTrace t(trace.path);
    t.wave_begin(kMain, R"({"tokens":8})");
    t.push(kMain, "forward/layer.0");
    t.alloc(kMain, 0x1000, 100);
    const uint64_t in_forward = t.now_ns() + 300;
    t.alloc(kMain, 0x1100, 50);
    t.free(kMain, 0x1100);
    t.pop(kMain);
    // autograd's worker runs the backward while the main thread waits in its wave
    t.push(kWorker, "backward/layer.1");
    const uint64_t in_backward = t.now_ns() + 300;
    t.alloc(kWorker, 0x2000, 200);  // the peak, with both CUPTI allocations live
    t.free(kWorker, 0x2000);
    t.pop(kWorker);
    const uint64_t after_backward = t.now_ns() + 300;
    t.alloc(kMain, 0x3000, 10);
    t.free(kMain, 0x1000);
    t.wave_end(kMain);
    // Learnt of long after, in another order than they happened.
    t.cupti_alloc(kCuptiThread, in_backward, 0x9000, 7000, "libnccl.so.2");
    t.cupti_alloc(kCuptiThread, in_forward, 0x8000, 5000, "libcublas.so.13");
    t.cupti_free(kCuptiThread, after_backward, 0x9000);
    t.close();
  }
  const Analysis a = analyze_trace(trace.path);
  // Read in seq order the peak would be 100 + 200 (+ the CUPTI bytes only at
  // the end); placed by time, both are live when the backward allocates.
  EXPECT_EQ(a.peak.bytes, 100u + 5000u + 7000u + 200u);
  EXPECT_EQ(a.peak.site.range, "backward/layer.1");
  EXPECT_EQ(cupti_group_bytes(a.peak.live, "libcublas.so.13", "forward/layer.0"), 5000u);
  EXPECT_EQ(cupti_group_bytes(a.peak.live, "libnccl.so.2", "backward/layer.1"), 7000u);
  ASSERT_EQ(a.waves.size(), 1u);
  EXPECT_EQ(a.waves[0].baseline_bytes, 0u);
  EXPECT_EQ(a.waves[0].peak.bytes, a.peak.bytes);
  // The workspace freed after the backward is gone by the end; cuBLAS's is not.
  EXPECT_EQ(a.memory.live_at_end_bytes, 5000u + 10u);
  EXPECT_TRUE(a.warnings.empty()) << a.warnings[0];
}

TEST(DeviceUsage, PlacedReaderInsertsByTimeAndKeepsSeqNonDecreasing) {
  TempTrace trace("reader");
  {
    SyntheticTrace t(trace.path);
    t.alloc(kMain, 0x1000, 1);  // time start + 1000
    const uint64_t between = t.now_ns() + 500;
    t.alloc(kMain, 0x2000, 2);  // start + 2000
    t.alloc(kMain, 0x3000, 3);
    t.cupti_alloc(kCuptiThread, between, 0x9000, 9, "lib");
    t.close();
  }
  struct Collect : TraceVisitor {
    std::vector<Event> events;
    void on_events(const Event* e, size_t n, const TraceMeta&) override { events.insert(events.end(), e, e + n); }
  } collect;
  read_trace_placed(trace.path, collect);
  ASSERT_EQ(collect.events.size(), 4u);
  EXPECT_EQ(collect.events[0].address, 0x1000u);
  EXPECT_EQ(collect.events[1].address, 0x9000u);
  EXPECT_EQ(collect.events[1].api, Api::kCupti);
  EXPECT_EQ(collect.events[1].seq, collect.events[2].seq);  // takes the seq of the event it precedes
  EXPECT_EQ(collect.events[2].address, 0x2000u);
  for (size_t i = 1; i < collect.events.size(); ++i) EXPECT_LE(collect.events[i - 1].seq, collect.events[i].seq);
}

// ---- device samples -----------------------------------------------------------------

TEST(DeviceUsage, SamplesGiveBytesOutsideAnyAllocator) {
  TempTrace trace("samples");
  constexpr uint64_t kContext = 1'000'000;
  {
    SyntheticTrace t(trace.path);
    t.counter(kMain, "device_total_bytes", 80ull << 30, 0);
    t.counter(kMain, "device_used_bytes", kContext, 0);
    t.wave_begin(kMain, R"({"tokens":8})");
    t.counter(kMain, "device_used_bytes", kContext, 0);
    t.push(kMain, "forward/layer.0");
    t.alloc(kMain, 0xA000, 4096);
    const uint64_t workspace = t.now_ns() + 500;
    t.counter(kMain, "device_used_bytes", kContext + 4096 + 65536 + 200'000, 0);
    t.pop(kMain);
    t.wave_end(kMain);
    t.cupti_alloc(kCuptiThread, workspace, 0xC000, 65536, "libnccl.so.2");
    t.close();
  }
  const Analysis a = analyze_trace(trace.path);
  const DeviceUsage& d = a.device;
  ASSERT_TRUE(d.present);
  EXPECT_EQ(d.samples, 3u);
  ASSERT_EQ(d.devices.size(), 1u);
  EXPECT_EQ(d.devices[0].total_bytes, 80ull << 30);
  EXPECT_EQ(d.devices[0].max_used_bytes, kContext + 4096 + 65536 + 200'000);
  EXPECT_EQ(a.peak.bytes, 4096u + 65536u);
  ASSERT_TRUE(d.after_peak.has_value());
  EXPECT_EQ(d.after_peak->accounted_bytes, 4096u);
  EXPECT_EQ(d.after_peak->cupti_only_bytes, 65536u);
  EXPECT_EQ(d.after_peak->outside_bytes(), static_cast<int64_t>(kContext + 65536 + 200'000));
  EXPECT_EQ(d.after_peak->unexplained_bytes(), static_cast<int64_t>(kContext + 200'000));
  EXPECT_EQ(d.after_peak->range, "forward/layer.0");
  ASSERT_TRUE(d.before_peak.has_value());
  EXPECT_EQ(d.before_peak->used_bytes, kContext);
  ASSERT_EQ(d.waves.size(), 1u);
  ASSERT_EQ(d.waves[0].devices.size(), 1u);
  const WaveDeviceWindow& w = d.waves[0].devices[0];
  EXPECT_EQ(w.samples, 2u);
  EXPECT_EQ(w.baseline.used_bytes, kContext);
  EXPECT_EQ(w.outside_growth_bytes, 65536 + 200'000);
  EXPECT_EQ(w.unexplained_growth_bytes, 200'000);

  const auto j = analysis_to_json(a);
  EXPECT_EQ(j["device"]["after_peak"]["outside_bytes"], kContext + 65536 + 200'000);
  EXPECT_EQ(j["device"]["waves"][0]["devices"][0]["unexplained_growth_bytes"], 200'000);
  const std::string text = render_analysis_text(a);
  EXPECT_NE(text.find("max outside any allocator"), std::string::npos) << text;
}

TEST(DeviceUsage, ReservedLevelIsWhatSamplesAreAccountedAgainst) {
  TempTrace trace("reserved");
  {
    SyntheticTrace t(trace.path);
    SyntheticTrace::Memory segment;
    segment.flags = kFlagReserved;
    t.alloc(kMain, 0x10000, 1 << 20, segment);  // the caching allocator's segment
    SyntheticTrace::Memory tensor;
    tensor.api = Api::kTorchPluggable;
    t.alloc(kMain, 0x10000, 4096, tensor);  // a tensor inside it
    t.counter(kMain, "device_used_bytes", (1 << 20) + 300, 0);
    t.close();
  }
  const Analysis a = analyze_trace(trace.path);
  EXPECT_EQ(a.memory.level, MemoryLevel::kAllocated);
  EXPECT_EQ(a.device.accounted_level, MemoryLevel::kReserved);
  ASSERT_TRUE(a.device.after_peak.has_value());
  EXPECT_EQ(a.device.after_peak->outside_bytes(), 300);
}

// A memory pool keeps freed memory: its reserve beyond its live allocations
// is an allocator's, not first-execution memory. The recorder samples the
// pool's reserve right after the device sample of the same boundary.
TEST(DeviceUsage, APoolsSlackIsNotOutsideAnyAllocator) {
  TempTrace trace("pool");
  constexpr uint64_t kContext = 1'000'000, kReserve = 1 << 20, kTensor = 4096, kModule = 70'000;
  SyntheticTrace::Memory pool;
  pool.memory = MemoryKind::kPool;
  pool.api = Api::kTorchPluggable;
  {
    SyntheticTrace t(trace.path);
    t.counter(kMain, "device_used_bytes", kContext, 0);
    for (int wave = 0; wave < 2; ++wave) {
      const bool cold = wave == 0;
      t.wave_begin(kMain, cold ? R"({"tokens":8,"cold":true})" : R"({"tokens":8,"cold":false})");
      // The cold wave loads a module (outside any allocator, kept) and grows the pool.
      t.counter(kMain, "device_used_bytes", kContext + (cold ? 0 : kModule + kReserve), 0);
      t.push(kMain, "forward/layer.0");
      t.alloc(kMain, 0xA000, kTensor, pool);
      t.counter(kMain, "device_used_bytes", kContext + kModule + kReserve, 0);
      if (cold) t.counter(kMain, "pool_reserved_bytes", kReserve, 0);  // only when it changed
      t.free(kMain, 0xA000, pool);
      t.pop(kMain);
      t.wave_end(kMain);
    }
    // A pool counter after another event says nothing of the sample before
    // it: a memory event, or a boundary that took no device sample.
    t.counter(kMain, "device_used_bytes", kContext + kModule + 2 * kReserve, 0);
    t.alloc(kMain, 0xB000, kTensor);
    t.counter(kMain, "pool_reserved_bytes", 2 * kReserve, 0);
    t.counter(kMain, "device_used_bytes", kContext + kModule + 4 * kReserve, 0);
    t.push(kMain, "optimizer/step");
    t.counter(kMain, "pool_reserved_bytes", 3 * kReserve, 0);
    t.pop(kMain);
    t.close();
  }
  const Analysis a = analyze_trace(trace.path);
  const DeviceUsage& d = a.device;
  ASSERT_EQ(d.waves.size(), 2u);
  ASSERT_EQ(d.waves[0].devices.size(), 1u);
  const WaveDeviceWindow& cold = d.waves[0].devices[0];
  EXPECT_EQ(cold.max_used.pool_slack_bytes, kReserve - kTensor);
  EXPECT_EQ(cold.max_used.outside_bytes(), static_cast<int64_t>(kContext + kModule));
  EXPECT_EQ(cold.unexplained_growth_bytes, static_cast<int64_t>(kModule));
  ASSERT_EQ(d.cold_warm.size(), 1u);
  EXPECT_EQ(d.cold_warm[0].unexplained_growth_delta_bytes, static_cast<int64_t>(kModule));
  // The last two samples keep the reserve they were taken with (1 MiB, not
  // 2; 2 MiB, not 3): the last one's outside bytes are the most.
  ASSERT_TRUE(d.devices.size() == 1u);
  EXPECT_EQ(d.devices[0].max_outside_bytes, static_cast<int64_t>(kContext + kModule + 2 * kReserve - kTensor));
  EXPECT_EQ(analysis_to_json(a)["device"]["waves"][0]["devices"][0]["max_used"]["pool_slack_bytes"],
            kReserve - kTensor);
}

// ---- first kernels -------------------------------------------------------------------

TEST(DeviceUsage, FirstKernelWindowsByWaveAndRange) {
  TempTrace trace("kernels");
  {
    SyntheticTrace t(trace.path);
    const uint64_t before_wave = t.now_ns() + 1;
    t.alloc(kMain, 0x1, 1);
    t.wave_begin(kMain, R"({"tokens":8})");
    t.push(kMain, "forward/layer.0");
    const uint64_t k0 = t.now_ns() + 100, k1 = t.now_ns() + 200;
    t.alloc(kMain, 0x2, 1);
    t.pop(kMain);
    t.push(kMain, "forward/layer.1");
    const uint64_t k2 = t.now_ns() + 100;
    t.alloc(kMain, 0x3, 1);
    t.pop(kMain);
    t.wave_end(kMain);
    t.deferred_mark(kCuptiThread, k2, "cupti.first_kernel", R"({"kernel":"softmax","start_ns":1,"end_ns":2})");
    t.deferred_mark(kCuptiThread, k0, "cupti.first_kernel", R"({"kernel":"gemm_a"})");
    t.deferred_mark(kCuptiThread, k1, "cupti.first_kernel", R"({"kernel":"gemm_b"})");
    t.deferred_mark(kCuptiThread, before_wave, "cupti.first_kernel", R"({"kernel":"init"})");
    t.close();
  }
  const Analysis a = analyze_trace(trace.path);
  const DeviceUsage& d = a.device;
  ASSERT_TRUE(d.present);
  EXPECT_EQ(d.first_kernels.count, 4u);
  ASSERT_EQ(d.waves.size(), 1u);
  const FirstKernels& fk = d.waves[0].first_kernels;
  EXPECT_EQ(fk.count, 3u);
  ASSERT_EQ(fk.by_range.size(), 2u);
  EXPECT_EQ(fk.by_range[0].range, "forward/layer.0");
  EXPECT_EQ(fk.by_range[0].kernels, (std::vector<std::string>{"gemm_a", "gemm_b"}));
  EXPECT_EQ(fk.by_range[1].range, "forward/layer.1");
  EXPECT_EQ(fk.by_range[1].kernels, (std::vector<std::string>{"softmax"}));
  const std::string text = render_analysis_text(a);
  EXPECT_NE(text.find("forward/layer.0: gemm_a, gemm_b"), std::string::npos) << text;
  EXPECT_NE(text.find("first kernel executions outside any wave: 1"), std::string::npos) << text;
}

// ---- cold versus warm -----------------------------------------------------------------

TEST(DeviceUsage, ColdMinusWarmBySource) {
  TempTrace trace("coldwarm");
  constexpr uint64_t kContext = 1'000'000, kModules = 300'000, kWorkspace = 65536;
  {
    SyntheticTrace t(trace.path);
    std::vector<uint64_t> workspace_times, kernel_times;
    for (int wave = 0; wave < 2; ++wave) {
      const bool cold = wave == 0;
      // What the cold wave loads stays: the warm wave starts with it.
      const uint64_t base = kContext + (cold ? 0 : kModules + kWorkspace);
      t.wave_begin(kMain,
                   cold ? R"({"tokens":8,"slots":["a"],"cold":true})" : R"({"tokens":8,"slots":["a"],"cold":false})");
      t.counter(kMain, "device_used_bytes", base, 0);
      t.push(kMain, "backward/layer.0");
      const uint64_t a = 0x1000 * static_cast<uint64_t>(wave + 1);
      t.alloc(kMain, a, 4096);
      if (cold) {
        workspace_times.push_back(t.now_ns() + 100);
        kernel_times.push_back(t.now_ns() + 200);
        kernel_times.push_back(t.now_ns() + 300);
      }
      t.counter(kMain, "device_used_bytes", kContext + kModules + kWorkspace + 4096, 0);
      t.free(kMain, a);
      t.pop(kMain);
      t.wave_end(kMain);
    }
    t.cupti_alloc(kCuptiThread, workspace_times[0], 0xC000, kWorkspace, "libcublasLt.so.13");
    for (uint64_t k : kernel_times) t.deferred_mark(kCuptiThread, k, "cupti.first_kernel", R"({"kernel":"k"})");
    t.close();
  }
  const Analysis a = analyze_trace(trace.path);
  const DeviceUsage& d = a.device;
  ASSERT_EQ(d.cold_warm.size(), 1u);
  const ColdWarmDelta& c = d.cold_warm[0];
  EXPECT_EQ(c.cold_wave, 0);
  EXPECT_EQ(c.warm_wave, 1);
  ASSERT_TRUE(c.has_samples);
  EXPECT_EQ(c.outside_growth_delta_bytes, static_cast<int64_t>(kModules + kWorkspace));
  EXPECT_EQ(c.unexplained_growth_delta_bytes, static_cast<int64_t>(kModules));
  EXPECT_EQ(c.cupti_only_delta_bytes, static_cast<int64_t>(kWorkspace));
  ASSERT_EQ(c.cupti_only_by_source.size(), 1u);
  EXPECT_EQ(c.cupti_only_by_source[0].source, "libcublasLt.so.13");
  EXPECT_EQ(c.cupti_only_by_source[0].cold_bytes, kWorkspace);
  EXPECT_EQ(c.cupti_only_by_source[0].warm_bytes, 0u);
  EXPECT_EQ(c.cold_first_kernels, 2u);
  EXPECT_EQ(c.warm_first_kernels, 0u);
  // The same difference through the function, the other way round.
  const ColdWarmDelta reversed = cold_minus_warm(d, 1, 0);
  EXPECT_EQ(reversed.cupti_only_delta_bytes, -static_cast<int64_t>(kWorkspace));
  EXPECT_EQ(analysis_to_json(a)["device"]["cold_minus_warm"][0]["unexplained_growth_delta_bytes"], kModules);
  const std::string text = render_analysis_text(a);
  EXPECT_NE(text.find("cold - warm"), std::string::npos) << text;
  EXPECT_NE(text.find("libcublasLt.so.13 64.00 KiB"), std::string::npos) << text;
}

// ---- CUPTI unavailable ------------------------------------------------------------------

TEST(DeviceUsage, UnavailableNoticeIsShown) {
  TempTrace trace("unavailable");
  {
    SyntheticTrace t(trace.path);
    t.mark(kMain, "cupti.unavailable", R"({"reason":"subscriber slot taken","tool":"nsys"})");
    t.alloc(kMain, 0x1, 100);
    t.close();
  }
  const Analysis a = analyze_trace(trace.path);
  ASSERT_TRUE(a.device.present);
  EXPECT_EQ(a.placement, nullptr);  // nothing deferred: one pass, as before
  ASSERT_EQ(a.device.unavailable.size(), 1u);
  EXPECT_EQ(a.device.unavailable[0], "subscriber slot taken (nsys)");
  EXPECT_EQ(analysis_to_json(a)["device"]["cupti"]["unavailable"][0], "subscriber slot taken (nsys)");
  const std::string text = render_analysis_text(a);
  EXPECT_NE(text.find("CUPTI was not available: subscriber slot taken (nsys)"), std::string::npos) << text;
}

TEST(DeviceUsage, TraceWithoutDeviceDataHasNoDeviceSection) {
  TempTrace trace("none");
  {
    SyntheticTrace t(trace.path);
    t.wave_begin(kMain, R"({"tokens":8})");
    t.mark(kMain, "user.mark", "{}");
    t.counter(kMain, "pool_reserved", 1 << 20);
    t.alloc(kMain, 0x1, 100);
    t.wave_end(kMain);
    t.close();
  }
  const Analysis a = analyze_trace(trace.path);
  EXPECT_FALSE(a.device.present);
  EXPECT_FALSE(analysis_to_json(a).contains("device"));
  EXPECT_EQ(render_analysis_text(a).find("\ndevice"), std::string::npos);
}

// ---- resource names (NVTX) ---------------------------------------------------------------

// Marks as the recorder writes them: CUPTI's resource callbacks in true order,
// NVTX's naming calls (nvtxNameCuStreamA, nvtxNameCudaStreamA ...).
void resource_name(SyntheticTrace& t, const char* kind, const char* api, const char* handle, const char* name) {
  t.mark(kMain, "nvtx.resource_name",
         std::string(R"({"kind":")") + kind + R"(","api":")" + api + R"(","handle":)" + handle + R"(,"name":")" + name +
             R"("})");
}

TEST(DeviceUsage, CuptiStreamsAreListedWithTheNameNvtxGaveTheirHandle) {
  TempTrace trace("stream_names");
  {
    SyntheticTrace t(trace.path);
    t.mark(kMain, "cupti.context", R"({"event":"create","device":0,"context_id":1})");
    t.mark(kMain, "cupti.stream", R"({"event":"create","device":0,"context_id":1,"stream_id":13,"stream":28672})");
    t.mark(kMain, "cupti.stream", R"({"event":"create","device":0,"context_id":1,"stream_id":14,"stream":28928})");
    resource_name(t, "stream", "cuda", "28672", "first name");
    resource_name(t, "stream", "cudart", "28672", "copy stream");  // the same stream: the last name wins
    resource_name(t, "context", "cuda", "20480", "main context");
    resource_name(t, "device", "cudart", "1", "gpu1");
    t.alloc(kMain, 0x1, 100);
    t.mark(kMain, "cupti.stream", R"({"event":"destroy","device":0,"context_id":1,"stream_id":14,"stream":28928})");
    t.close();
  }
  const Analysis a = analyze_trace(trace.path);
  ASSERT_TRUE(a.device.present);
  EXPECT_EQ(a.device.streams, 3u) << "resource marks, as before";
  ASSERT_EQ(a.device.cupti_streams.size(), 2u);
  EXPECT_EQ(a.device.cupti_streams[0].handle, 0x7000u);
  EXPECT_EQ(a.device.cupti_streams[0].stream_id, 13u);
  EXPECT_EQ(a.device.cupti_streams[0].name, "copy stream");
  EXPECT_FALSE(a.device.cupti_streams[0].destroyed);
  EXPECT_EQ(a.device.cupti_streams[1].name, "");
  EXPECT_TRUE(a.device.cupti_streams[1].destroyed);
  ASSERT_EQ(a.device.named_resources.size(), 4u) << "one per (kind, api, handle)";
  EXPECT_TRUE(a.device.named_resources[0].cupti_stream);
  EXPECT_EQ(a.device.named_resources[0].name, "first name") << "the driver API's own last name";
  EXPECT_EQ(a.device.named_resources[2].kind, "context");
  EXPECT_FALSE(a.device.named_resources[2].cupti_stream);

  const auto json = analysis_to_json(a)["device"];
  EXPECT_EQ(json["cupti_streams"][0]["stream"], 28672u);
  EXPECT_EQ(json["cupti_streams"][0]["stream_id"], 13u);
  EXPECT_EQ(json["cupti_streams"][0]["context_id"], 1u);
  EXPECT_EQ(json["cupti_streams"][0]["name"], "copy stream");
  EXPECT_TRUE(json["cupti_streams"][1]["name"].is_null());
  EXPECT_EQ(json["cupti_streams"][1]["destroyed"], true);
  EXPECT_EQ(json["named_resources"][1]["api"], "cudart");
  EXPECT_EQ(json["named_resources"][1]["handle"], 28672u);
  EXPECT_EQ(json["named_resources"][1]["cupti_stream"], true);
  EXPECT_EQ(json["named_resources"][2]["name"], "main context");
  EXPECT_EQ(json["named_resources"][2]["handle"], 20480u);
  EXPECT_EQ(json["named_resources"][3]["handle"], 1);

  const std::string text = render_analysis_text(a);
  EXPECT_NE(text.find("stream 0x7000  id 13  context 1  device 0  copy stream\n"), std::string::npos) << text;
  EXPECT_NE(text.find("stream 0x7100  id 14  context 1  device 0  destroyed  (unnamed)\n"), std::string::npos) << text;
  EXPECT_NE(text.find("context  cuda    0x5000             main context\n"), std::string::npos) << text;
  EXPECT_NE(text.find("device   cudart  1                  gpu1\n"), std::string::npos) << text;
}

TEST(DeviceUsage, ResourceNamesAloneShowTheDeviceSection) {
  TempTrace trace("names_only");
  {
    SyntheticTrace t(trace.path);
    resource_name(t, "stream", "cudart", "18446603336526616184", "high \\\"q\\\"");
    resource_name(t, "device", "cuda", "-1", "none");
    t.alloc(kMain, 0x1, 100);
    t.close();
  }
  const Analysis a = analyze_trace(trace.path);
  ASSERT_TRUE(a.device.present) << "named resources are device information";
  EXPECT_TRUE(a.device.cupti_streams.empty());
  ASSERT_EQ(a.device.named_resources.size(), 2u);
  EXPECT_EQ(a.device.named_resources[0].handle, 0xffff800012345678u);
  EXPECT_EQ(a.device.named_resources[0].name, "high \"q\"");
  EXPECT_FALSE(a.device.named_resources[0].cupti_stream);
  EXPECT_EQ(a.device.named_resources[1].device_ordinal(), -1);
  const auto json = analysis_to_json(a)["device"];
  EXPECT_EQ(json["named_resources"][0]["handle"], 0xffff800012345678u);
  EXPECT_EQ(json["named_resources"][1]["handle"], -1);
  EXPECT_EQ(json["cupti_streams"].size(), 0u);
  const std::string text = render_analysis_text(a);
  EXPECT_NE(text.find("named resources (NVTX"), std::string::npos) << text;
  EXPECT_NE(text.find("stream   cudart  0xffff800012345678 high \"q\"\n"), std::string::npos) << text;
  EXPECT_NE(text.find("device   cuda    -1                 none\n"), std::string::npos) << text;
  EXPECT_EQ(text.find("streams (CUPTI"), std::string::npos) << text;
}

// ---- exporters ------------------------------------------------------------------------

TEST(DeviceUsage, ExportsCountCuptiOnlyOnceAndDuplicatesNever) {
  TempTrace trace("export");
  write_dedup_trace(trace.path, true);
  test_support::Scratch dir;
  const Analysis a = analyze_trace(trace.path);
  ExportOptions o;
  o.trace = trace.path;
  o.output = dir.path("out.json");
  std::vector<std::string> warnings;
  o.warn = [&](const std::string& w) { warnings.push_back(w); };
  find_exporter("chrome")->write(o);
  std::ifstream in(o.output);
  const nlohmann::json doc = nlohmann::json::parse(in);
  uint64_t slices = 0, bytes = 0;
  for (const auto& e : doc["traceEvents"])
    if (e["ph"] == "X") {
      ++slices;
      bytes += e["args"]["bytes"].get<uint64_t>();
    }
  EXPECT_EQ(slices, a.memory.counts.allocs);
  EXPECT_EQ(bytes, 4096u + 1000u + 10u + 65536u);
  for (const char* format : {"perfetto", "html", "nvtxt", "torch-snapshot"}) {
    ExportOptions p = o;
    p.output = dir.path(std::string("out.") + format);
    EXPECT_NO_THROW(find_exporter(format)->write(p)) << format;
  }
}

}  // namespace
}  // namespace psc
