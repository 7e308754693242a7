// Golden traces whose answer is known by construction: a hand-built LoRA step
// (3 decoder layers, forward / recompute / backward / optimizer, two waves with
// gradient accumulation) and small traces for each rule of the analysis.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <map>
#include <string>

#include "analysis/analysis.h"
#include "tests/support/synthetic_trace.h"
#include "tests/support/test_support.h"

namespace psc {
namespace {

using test_support::TempTrace;

uint64_t category_bytes(const LiveBreakdown& live, Category c) { return live.category_bytes[static_cast<size_t>(c)]; }

// Bytes of the (range, category) group, summed over layers; 0 if absent.
uint64_t group_bytes(const LiveBreakdown& live, const std::string& range, Category c) {
  uint64_t total = 0;
  for (const LiveGroup& g : live.groups)
    if (g.range == range && g.category == c) total += g.bytes;
  return total;
}

const LayerRow& layer_row(const LiveBreakdown& live, int layer) {
  static const LayerRow kEmpty;
  for (const LayerRow& r : live.layers)
    if (r.layer == layer) return r;
  ADD_FAILURE() << "no row for layer " << layer;
  return kEmpty;
}

// ---- the hand-built step ----------------------------------------------------------
//
// Thread 0 runs forward, the wave ranges and the optimizer; thread 1 is
// autograd's worker and runs the head backward and every layer's recompute and
// backward under its own ranges. Sizes scale with `s` (tokens); adapter
// gradients do not, and are allocated only by the first wave (later waves
// accumulate into them in place).
//
// Addresses: weights 0x1000, optimizer state 0x2000, gradients 0x3000+layer,
// per-wave activations at 0x10000 * (wave + 1) + offset.
constexpr uint32_t kMain = 0;
constexpr uint32_t kWorker = 1;
constexpr uint64_t kWeights = 1000;
constexpr uint64_t kOptimizerState = 30;
constexpr uint64_t kGrad[3] = {22, 21, 20};

void emit_wave(SyntheticTrace& t, int wave, uint64_t s, bool new_gradients, const std::string& payload) {
  const uint64_t base = 0x10000 * static_cast<uint64_t>(wave + 1);
  const uint64_t E = base + 1, F0 = base + 2, O0 = base + 3, O1 = base + 4, O2 = base + 5, L = base + 6, HG = base + 7;
  const uint64_t R[3] = {base + 10, base + 11, base + 12};
  const uint64_t IG[3] = {base + 20, base + 21, base + 22};
  const uint64_t recompute_bytes[3] = {70 * s, 60 * s, 500 * s};

  t.wave_begin(kMain, payload);
  t.push(kMain, "head/embedding");
  t.alloc(kMain, E, 100 * s);  // boundary(0)
  t.pop(kMain);
  t.push(kMain, "forward/layer.0");
  t.alloc(kMain, F0, 10 * s);   // forward temporary
  t.alloc(kMain, O0, 101 * s);  // boundary(1)
  t.free(kMain, F0);
  t.pop(kMain);
  t.push(kMain, "forward/layer.1");
  t.alloc(kMain, O1, 102 * s);  // boundary(2)
  t.pop(kMain);
  t.push(kMain, "forward/layer.2");
  t.alloc(kMain, O2, 103 * s);  // the head's input
  t.pop(kMain);
  t.push(kMain, "head/loss");
  t.alloc(kMain, L, 5 * s);
  t.pop(kMain);

  t.push(kWorker, "head/lm_head");
  t.alloc(kWorker, HG, 7 * s);  // gradient of the last layer's output
  t.free(kWorker, O2);
  t.free(kWorker, L);
  t.pop(kWorker);
  const uint64_t saved_input[3] = {E, O0, O1};
  for (int layer = 2; layer >= 0; --layer) {
    const std::string n = std::to_string(layer);
    t.push(kWorker, "recompute/layer." + n);
    t.alloc(kWorker, R[layer], recompute_bytes[layer]);  // workspace(layer)
    t.pop(kWorker);
    t.push(kWorker, "backward/layer." + n);
    if (new_gradients) t.alloc(kWorker, 0x3000 + static_cast<uint64_t>(layer), kGrad[layer]);
    t.alloc(kWorker, IG[layer], 8 * s);  // input gradient, dies in the layer below
    t.free(kWorker, R[layer]);
    t.free(kWorker, layer == 2 ? HG : IG[layer + 1]);
    t.free(kWorker, saved_input[layer]);
    if (layer == 0) t.free(kWorker, IG[0]);
    t.pop(kWorker);
  }
  t.wave_end(kMain);
}

void emit_step(SyntheticTrace& t) {
  t.name_thread(kMain, "MainThread", 4242);
  t.name_thread(kWorker, "autograd", 4243);
  t.alloc(kMain, 0x1000, kWeights);  // no range: before the step
  emit_wave(t, 0, 1, true, R"({"tokens":128,"slots":["a"],"groups":1,"cold":true})");
  emit_wave(t, 1, 2, false, R"({"tokens":256,"slots":["a"],"groups":1,"cold":false})");
  t.push(kMain, "optimizer/step");
  t.alloc(kMain, 0x2000, kOptimizerState);
  for (uint64_t layer = 0; layer < 3; ++layer) t.free(kMain, 0x3000 + layer);
  t.pop(kMain);
}

class GoldenStep : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    trace_ = new TempTrace("step");
    SyntheticTrace t(trace_->path);
    emit_step(t);
    t.close();
    events_ = t.events();
    analysis_ = new Analysis(analyze_trace(trace_->path));
  }
  static void TearDownTestSuite() {
    delete analysis_;
    delete trace_;
  }
  static TempTrace* trace_;
  static Analysis* analysis_;
  static uint64_t events_;
};
TempTrace* GoldenStep::trace_ = nullptr;
Analysis* GoldenStep::analysis_ = nullptr;
uint64_t GoldenStep::events_ = 0;

TEST_F(GoldenStep, CountsEveryEventAndReadsCleanly) {
  const Analysis& a = *analysis_;
  EXPECT_EQ(a.trace.status.events, events_);
  EXPECT_TRUE(a.trace.status.complete());
  EXPECT_TRUE(a.trace.clean_end);
  EXPECT_EQ(a.trace.dropped, 0u);
  EXPECT_EQ(a.trace.missing_seqs, 0u);
  EXPECT_EQ(a.trace.first_seq, 1u);
  EXPECT_EQ(a.trace.last_seq, events_);
  EXPECT_EQ(a.memory.level, MemoryLevel::kAllocated);
  EXPECT_EQ(a.memory.counts.unmatched_frees, 0u);
  EXPECT_EQ(a.memory.counts.nested, 0u);
  // 1 weight + wave 0 (E F0 O0 O1 O2 L HG + 3 R + 3 G + 3 IG) + wave 1 (same minus G) + state.
  EXPECT_EQ(a.memory.counts.allocs, 1u + 16u + 13u + 1u);
  EXPECT_EQ(a.memory.live_at_end_bytes, kWeights + kOptimizerState);
  EXPECT_TRUE(a.warnings.empty()) << a.warnings.front();
}

// Live bytes, step by step, in wave 1 (s = 2, gradients already live):
//   baseline 1063 = weights 1000 + gradients 63
//   +E 200 +F0 20 +O0 202 -F0 +O1 204 +O2 206 +L 10        = 1885
//   +HG 14 -O2 -L                                          = 1683
//   +R2 1000 +IG2 16                                       = 2699  <- peak
TEST_F(GoldenStep, PeakIsExactAndFallsInLayerTwoBackward) {
  const Analysis& a = *analysis_;
  EXPECT_EQ(a.peak.bytes, 2699u);
  ASSERT_TRUE(a.peak.site.reached);
  EXPECT_EQ(a.peak.site.range, "backward/layer.2");
  EXPECT_EQ(a.peak.site.parsed.phase, Phase::kBackward);
  EXPECT_EQ(a.peak.site.parsed.layer, 2);
  EXPECT_EQ(a.peak.site.thread, kWorker);
  EXPECT_EQ(a.peak.live.bytes, a.peak.bytes);
}

TEST_F(GoldenStep, LiveAtPeakByCategory) {
  const LiveBreakdown& live = analysis_->peak.live;
  EXPECT_EQ(category_bytes(live, Category::kPersistent), kWeights);
  EXPECT_EQ(category_bytes(live, Category::kBoundary), 200u + 202u + 204u);
  EXPECT_EQ(category_bytes(live, Category::kAdapterGradient), 22u + 21u + 20u);
  EXPECT_EQ(category_bytes(live, Category::kWorkspace), 1000u);
  // HG (made in head/lm_head, dies in layer 2) and IG2 (dies in layer 1).
  EXPECT_EQ(category_bytes(live, Category::kInputGradient), 14u + 16u);
  EXPECT_EQ(category_bytes(live, Category::kOutput), 0u);
  EXPECT_EQ(category_bytes(live, Category::kFirstExecution), 0u);
  EXPECT_EQ(live.allocations, 1u + 3u + 3u + 1u + 1u + 1u);

  EXPECT_EQ(group_bytes(live, "head/embedding", Category::kBoundary), 200u);
  EXPECT_EQ(group_bytes(live, "forward/layer.0", Category::kBoundary), 202u);
  EXPECT_EQ(group_bytes(live, "forward/layer.1", Category::kBoundary), 204u);
  EXPECT_EQ(group_bytes(live, "recompute/layer.2", Category::kWorkspace), 1000u);
  EXPECT_EQ(group_bytes(live, "backward/layer.0", Category::kAdapterGradient), 22u);
  EXPECT_EQ(group_bytes(live, "", Category::kPersistent), kWeights);
}

TEST_F(GoldenStep, PerLayerTableAtPeak) {
  const LiveBreakdown& live = analysis_->peak.live;
  ASSERT_EQ(live.layers.size(), 3u);
  // boundary(i) is charged to the layer that consumes it.
  EXPECT_EQ(layer_row(live, 0).boundary_bytes, 200u);
  EXPECT_EQ(layer_row(live, 1).boundary_bytes, 202u);
  EXPECT_EQ(layer_row(live, 2).boundary_bytes, 204u);
  EXPECT_EQ(layer_row(live, 0).adapter_gradient_bytes, 22u);
  EXPECT_EQ(layer_row(live, 1).adapter_gradient_bytes, 21u);
  EXPECT_EQ(layer_row(live, 2).adapter_gradient_bytes, 20u);
  EXPECT_EQ(layer_row(live, 2).workspace_bytes, 1000u);
  EXPECT_EQ(layer_row(live, 0).workspace_bytes, 0u);
  EXPECT_EQ(layer_row(live, 2).other_bytes, 14u + 16u);  // input gradients HG and IG2
}

// Wave 0 (s = 1, gradients new): baseline 1000;
//   +E 100 +F0 10 +O0 101 -F0 +O1 102 +O2 103 +L 5 = 1411; +HG 7 -O2 -L = 1310;
//   +R2 500 +G2 20 +IG2 8 = 1838 <- peak
TEST_F(GoldenStep, WaveBaselinesAndPeaks) {
  const Analysis& a = *analysis_;
  ASSERT_EQ(a.waves.size(), 2u);
  const WaveReport& w0 = a.waves[0];
  const WaveReport& w1 = a.waves[1];
  EXPECT_EQ(w0.span.index, 0);
  EXPECT_TRUE(w0.span.ended);
  EXPECT_EQ(w0.span.payload.tokens, 128);
  EXPECT_EQ(w0.span.payload.cold, true);
  EXPECT_EQ(w0.span.payload.groups, 1);
  EXPECT_EQ(w0.span.payload.slots, std::vector<std::string>{"a"});
  EXPECT_EQ(w0.baseline_bytes, 1000u);
  EXPECT_EQ(w0.peak.bytes, 1838u);
  EXPECT_EQ(w0.measured_peak_bytes(), 838u);
  EXPECT_EQ(w0.peak.site.range, "backward/layer.2");

  EXPECT_EQ(w1.span.payload.tokens, 256);
  EXPECT_EQ(w1.span.payload.cold, false);
  EXPECT_EQ(w1.baseline_bytes, 1063u);
  EXPECT_EQ(w1.peak.bytes, 2699u);
  EXPECT_EQ(w1.measured_peak_bytes(), 1636u);
  EXPECT_EQ(w1.peak.site.parsed.layer, 2);
}

TEST_F(GoldenStep, PerLayerTableAtEachWavePeak) {
  const LiveBreakdown& w0 = analysis_->waves[0].peak.live;
  EXPECT_EQ(w0.bytes, 1838u);
  EXPECT_EQ(layer_row(w0, 0).boundary_bytes, 100u);
  EXPECT_EQ(layer_row(w0, 1).boundary_bytes, 101u);
  EXPECT_EQ(layer_row(w0, 2).boundary_bytes, 102u);
  // Only layer 2's gradient exists yet at wave 0's peak.
  EXPECT_EQ(layer_row(w0, 2).adapter_gradient_bytes, 20u);
  EXPECT_EQ(layer_row(w0, 1).adapter_gradient_bytes, 0u);
  EXPECT_EQ(layer_row(w0, 2).workspace_bytes, 500u);
  EXPECT_EQ(category_bytes(w0, Category::kPersistent), kWeights);

  const LiveBreakdown& w1 = analysis_->waves[1].peak.live;
  EXPECT_EQ(w1.bytes, 2699u);
  EXPECT_EQ(layer_row(w1, 1).adapter_gradient_bytes, 21u);
  EXPECT_EQ(layer_row(w1, 2).workspace_bytes, 1000u);
}

TEST_F(GoldenStep, TimelineEndsAtWhatIsLiveAtTheEnd) {
  const Analysis& a = *analysis_;
  ASSERT_FALSE(a.timeline.empty());
  EXPECT_LE(a.timeline.size(), 100u);
  EXPECT_EQ(a.timeline.back().live_bytes, kWeights + kOptimizerState);
  uint64_t max = 0;
  for (const TimelinePoint& p : a.timeline) max = std::max(max, p.max_bytes);
  EXPECT_EQ(max, a.peak.bytes);
}

// ---- small traces for single rules ---------------------------------------------------

// Replays allocs and frees the obvious way: the oracle for peaks.
struct Oracle {
  std::map<std::pair<int16_t, uint64_t>, uint64_t> live;
  uint64_t bytes = 0, peak = 0, peak_seq = 0;
  void alloc(int16_t device, uint64_t address, uint64_t size, uint64_t seq) {
    auto [it, fresh] = live.emplace(std::make_pair(device, address), size);
    if (!fresh) {
      bytes -= it->second;
      it->second = size;
    }
    bytes += size;
    if (bytes > peak) {
      peak = bytes;
      peak_seq = seq;
    }
  }
  void free(int16_t device, uint64_t address) {
    auto it = live.find({device, address});
    if (it == live.end()) return;
    bytes -= it->second;
    live.erase(it);
  }
};

TEST(AnalysisGolden, MultiThreadInterleavingsGiveTheExactPeak) {
  TempTrace file("threads");
  Oracle oracle;
  uint64_t events = 0;
  {
    SyntheticTrace t(file.path);
    constexpr int kThreads = 8;
    std::vector<std::vector<uint64_t>> owned(kThreads);
    uint64_t rng = 0x12345678;
    auto next = [&] {
      rng ^= rng << 13;
      rng ^= rng >> 7;
      rng ^= rng << 17;
      return rng;
    };
    for (int i = 0; i < 200000; ++i) {
      const uint32_t thread = static_cast<uint32_t>(next() % kThreads);
      auto& mine = owned[thread];
      // Each thread owns its addresses (as an allocator's would be), grows
      // for a while and shrinks for a while so peaks come and go.
      const bool grow = mine.empty() || (next() % 100) < ((i / 5000) % 2 ? 35 : 65);
      if (grow) {
        const uint64_t address = (static_cast<uint64_t>(thread) << 40) | (static_cast<uint64_t>(i) << 6);
        const uint64_t size = 1 + next() % 100000;
        t.alloc(thread, address, size);
        oracle.alloc(0, address, size, t.last_seq());
        mine.push_back(address);
      } else {
        const size_t pick = next() % mine.size();
        t.free(thread, mine[pick]);
        oracle.free(0, mine[pick]);
        mine[pick] = mine.back();
        mine.pop_back();
      }
    }
    t.close();
    events = t.events();
  }
  const Analysis a = analyze_trace(file.path);
  EXPECT_EQ(a.trace.status.events, events);
  EXPECT_EQ(a.peak.bytes, oracle.peak);
  EXPECT_EQ(a.peak.site.seq, oracle.peak_seq);
  EXPECT_EQ(a.peak.live.bytes, oracle.peak);
  EXPECT_EQ(a.memory.live_at_end_bytes, oracle.bytes);
  EXPECT_EQ(a.memory.live_at_end_allocations, oracle.live.size());
  EXPECT_EQ(a.memory.counts.unmatched_frees, 0u);
  EXPECT_TRUE(a.warnings.empty());
}

TEST(AnalysisGolden, NestedAndFailedEventsDoNotCount) {
  TempTrace file("nested");
  {
    SyntheticTrace t(file.path);
    SyntheticTrace::Memory nested;
    nested.flags = kFlagNested;
    nested.api = Api::kCuMemAlloc;
    SyntheticTrace::Memory failed;
    failed.flags = kFlagFailed;
    // cudaMalloc -> cuMemAlloc: the inner call returns (and is recorded) first.
    t.alloc(0, 0xA000, 4096, nested);
    t.alloc(0, 0xA000, 4096);
    t.alloc(0, 0, 1u << 30, failed);  // an OOM: nothing changed hands
    t.free(0, 0xA000);
    nested.api = Api::kCuMemFree;
    t.free(0, 0xA000, nested);
    t.close();
  }
  const Analysis a = analyze_trace(file.path);
  EXPECT_EQ(a.peak.bytes, 4096u);
  EXPECT_EQ(a.memory.counts.allocs, 1u);
  EXPECT_EQ(a.memory.counts.frees, 1u);
  EXPECT_EQ(a.memory.counts.nested, 2u);
  EXPECT_EQ(a.memory.counts.failed, 1u);
  EXPECT_EQ(a.memory.counts.unmatched_frees, 0u);
  EXPECT_EQ(a.memory.live_at_end_bytes, 0u);
}

TEST(AnalysisGolden, UnmatchedFreesAndReusedAddressesAreCounted) {
  TempTrace file("unmatched");
  {
    SyntheticTrace t(file.path);
    t.free(0, 0xDEAD);  // never allocated
    t.alloc(0, 0xB000, 100);
    t.free(0, 0xB000);
    t.free(0, 0xB000);  // double free
    t.alloc(0, 0xC000, 300);
    t.alloc(0, 0xC000, 50);  // the free of the first was lost: it ends here
    t.free(0, 0);            // free(NULL)
    SyntheticTrace::Memory other_device;
    other_device.device = 1;
    t.alloc(0, 0xC000, 7, other_device);  // same address, other device: distinct
    t.close();
  }
  const Analysis a = analyze_trace(file.path);
  EXPECT_EQ(a.memory.counts.unmatched_frees, 2u);
  EXPECT_EQ(a.memory.counts.replaced, 1u);
  EXPECT_EQ(a.memory.counts.null_frees, 1u);
  EXPECT_EQ(a.peak.bytes, 300u);
  EXPECT_EQ(a.memory.live_at_end_bytes, 57u);
  EXPECT_EQ(a.memory.live_at_end_allocations, 2u);
}

TEST(AnalysisGolden, ReservedLevelOnlyWhenNoAllocatedEvents) {
  SyntheticTrace::Memory reserved;
  reserved.flags = kFlagReserved;
  {
    TempTrace file("reserved");
    SyntheticTrace t(file.path);
    t.alloc(0, 0x1000, 2u << 20, reserved);
    t.alloc(0, 0x2000, 2u << 20, reserved);
    t.free(0, 0x1000, reserved);
    t.close();
    const Analysis a = analyze_trace(file.path);
    EXPECT_EQ(a.memory.level, MemoryLevel::kReserved);
    EXPECT_EQ(a.peak.bytes, 4u << 20);
    EXPECT_EQ(a.memory.other_level_events, 0u);
  }
  {
    TempTrace file("both");
    SyntheticTrace t(file.path);
    t.alloc(0, 0x1000, 2u << 20, reserved);  // a segment ...
    t.alloc(0, 0x1000, 512);                 // ... and a tensor in it
    t.alloc(0, 0x1200, 256);
    t.free(0, 0x1000);
    t.close();
    const Analysis a = analyze_trace(file.path);
    EXPECT_EQ(a.memory.level, MemoryLevel::kAllocated);
    EXPECT_EQ(a.peak.bytes, 768u);
    EXPECT_EQ(a.memory.other_level_events, 1u);
  }
}

TEST(AnalysisGolden, MapsUnmapsAndCountersAreNotMemory) {
  TempTrace file("vmm");
  {
    SyntheticTrace t(file.path);
    SyntheticTrace::Memory physical;
    physical.memory = MemoryKind::kVmmPhysical;
    physical.api = Api::kCuMemCreate;
    t.alloc(0, 0x7000, 2u << 20, physical);
    t.map(0, 0x7f0000000000, 2u << 20);
    t.map(0, 0x7f0000200000, 2u << 20);  // the same physical memory mapped twice
    t.counter(0, "pool_reserved", 1u << 30);
    t.map(0, 0x7f0000000000, 2u << 20, EventKind::kUnmap);
    t.close();
  }
  const Analysis a = analyze_trace(file.path);
  EXPECT_EQ(a.peak.bytes, 2u << 20);
  EXPECT_EQ(a.memory.maps, 2u);
  EXPECT_EQ(a.memory.unmaps, 1u);
  EXPECT_EQ(a.memory.counters, 1u);
}

TEST(AnalysisGolden, ProcessWideRangesAttributeThreadsWithoutRanges) {
  TempTrace file("startend");
  {
    SyntheticTrace t(file.path);
    t.wave_begin(0, R"({"tokens":4})");
    t.range_start(0, 77, "backward/layer.1");
    t.alloc(5, 0x100, 64);  // a worker thread with no range of its own
    t.push(5, "backward/layer.3");
    t.alloc(5, 0x200, 32);  // its own range wins
    t.pop(5);
    t.range_end(2, 77);     // ended on another thread
    t.alloc(5, 0x300, 16);  // nothing open but the wave on another thread: the wave's
    t.wave_end(0);
    t.close();
  }
  const Analysis a = analyze_trace(file.path);
  ASSERT_TRUE(a.peak.site.reached);
  EXPECT_EQ(a.peak.site.range, "wave");
  const LiveBreakdown& live = a.peak.live;
  uint64_t in_layer1 = 0, in_layer3 = 0, in_wave = 0;
  for (const LiveGroup& g : live.groups) {
    if (g.range == "backward/layer.1") in_layer1 += g.bytes;
    if (g.range == "backward/layer.3") in_layer3 += g.bytes;
    if (g.range == "wave") in_wave += g.bytes;
  }
  EXPECT_EQ(in_layer1, 64u);
  EXPECT_EQ(in_layer3, 32u);
  EXPECT_EQ(in_wave, 16u);
  // Still live at the end and made in backward: pending adapter gradients.
  EXPECT_EQ(category_bytes(live, Category::kAdapterGradient), 96u);
}

// An intra-op pool's worker thread has no range of its own: inside a wave its
// blocks belong to the range the thread that started the parallel region
// opened last; outside a wave they keep no range.
TEST(AnalysisGolden, WorkerThreadBlocksBelongToTheRangeOpenedLast) {
  TempTrace file("workers");
  {
    SyntheticTrace t(file.path);
    t.alloc(3, 0x10, 8);  // before any wave: no range
    t.push(0, "optimizer/step");
    t.alloc(3, 0x20, 4);  // outside a wave, even with a range open elsewhere
    t.pop(0);
    t.wave_begin(0, R"({"tokens":4})");
    t.push(0, "forward/layer.0");
    t.push(0, "recompute/layer.2");
    t.alloc(3, 0x100, 64);  // the worker, inside layer 2's recompute
    t.pop(0);
    t.alloc(4, 0x200, 32);  // another worker, after it: layer 0's forward again
    t.pop(0);
    t.wave_end(0);
    t.close();
  }
  const Analysis a = analyze_trace(file.path);
  std::map<std::string, uint64_t> by_range;
  for (const LiveGroup& g : a.peak.live.groups) by_range[g.range] += g.bytes;
  EXPECT_EQ(by_range[""], 12u);
  EXPECT_EQ(by_range["recompute/layer.2"], 64u);
  EXPECT_EQ(by_range["forward/layer.0"], 32u);
}

TEST(AnalysisGolden, WaveEdgeCases) {
  TempTrace file("waves");
  {
    SyntheticTrace t(file.path);
    t.alloc(0, 0x1, 10);
    t.wave_begin(0, R"({"tokens":1,"cold":true})");
    t.wave_end(0);  // no growth: measured 0, snapshot at its start
    t.wave_begin(0, "{not json");
    t.alloc(0, 0x2, 5);
    t.free(0, 0x2);
    t.wave_end(0);
    t.push(0, "wave");  // no payload mark at all; the trace stops inside it
    t.alloc(0, 0x3, 40);
    t.alloc(0, 0x4, 2);
    t.close();
  }
  const Analysis a = analyze_trace(file.path);
  ASSERT_EQ(a.waves.size(), 3u);
  EXPECT_EQ(a.waves[0].baseline_bytes, 10u);
  EXPECT_EQ(a.waves[0].peak.bytes, 10u);
  EXPECT_EQ(a.waves[0].measured_peak_bytes(), 0u);
  EXPECT_FALSE(a.waves[0].peak.site.reached);
  EXPECT_EQ(a.waves[0].peak.live.bytes, 10u);
  EXPECT_TRUE(a.waves[1].span.payload.present);
  EXPECT_FALSE(a.waves[1].span.payload.error.empty());
  EXPECT_FALSE(a.waves[1].span.payload.tokens.has_value());
  EXPECT_EQ(a.waves[1].measured_peak_bytes(), 5u);
  EXPECT_FALSE(a.waves[2].span.payload.present);
  EXPECT_FALSE(a.waves[2].span.ended);
  EXPECT_EQ(a.waves[2].baseline_bytes, 10u);
  EXPECT_EQ(a.waves[2].peak.bytes, 52u);
  EXPECT_EQ(a.peak.bytes, 52u);
  EXPECT_TRUE(a.warnings.empty());
}

TEST(AnalysisGolden, HugeLayerNumbersGetSparseRows) {
  TempTrace file("hugelayer");
  {
    SyntheticTrace t(file.path);
    t.push(0, "backward/layer.1");
    t.alloc(0, 0x1, 8);
    t.pop(0);
    t.push(0, "backward/layer.1000000");
    t.alloc(0, 0x2, 16);
    t.pop(0);
    t.close();
  }
  const Analysis a = analyze_trace(file.path);
  ASSERT_EQ(a.peak.live.layers.size(), 2u);
  EXPECT_EQ(a.peak.live.layers[0].layer, 1);
  EXPECT_EQ(a.peak.live.layers[1].layer, 1000000);
  // No wave: still live at the end and made outside any wave is persistent,
  // which the per-layer table holds as "other" bytes of the range's layer.
  EXPECT_EQ(a.peak.live.layers[1].other_bytes, 16u);
}

TEST(AnalysisGolden, EmptyTraceReportsNothingLive) {
  TempTrace file("empty");
  {
    SyntheticTrace t(file.path);
    t.close();
  }
  const Analysis a = analyze_trace(file.path);
  EXPECT_EQ(a.trace.status.events, 0u);
  EXPECT_EQ(a.peak.bytes, 0u);
  EXPECT_FALSE(a.peak.site.reached);
  EXPECT_TRUE(a.peak.live.groups.empty());
  EXPECT_TRUE(a.waves.empty());
  EXPECT_TRUE(a.trace.clean_end);
}

TEST(AnalysisGolden, DropsAreReportedByReason) {
  TempTrace file("drops");
  {
    SyntheticTrace t(file.path);
    t.alloc(0, 0x10, 1);
    t.skip_seq(5);  // the dropped events took their sequence numbers with them
    t.alloc(0, 0x20, 1);
    std::array<uint64_t, format::kDropReasonCount> drops{};
    drops[static_cast<size_t>(format::DropReason::kBufferFull)] = 3;
    drops[static_cast<size_t>(format::DropReason::kRangeDepth)] = 2;
    t.drops(drops);
    t.close(false);
  }
  const Analysis a = analyze_trace(file.path);
  EXPECT_EQ(a.trace.missing_seqs, 5u);
  EXPECT_EQ(a.trace.dropped, 5u);
  EXPECT_EQ(a.trace.drops[static_cast<size_t>(format::DropReason::kBufferFull)], 3u);
  EXPECT_FALSE(a.trace.clean_end);
}

// A trace without its end mark whose writer still runs on this host is being
// written, not the trace of a process that was killed; one whose writer is
// gone (or another host's) is not.
TEST(AnalysisGolden, ATraceWhoseWriterStillRunsIsBeingWritten) {
  char host[65] = {};
  ASSERT_EQ(gethostname(host, sizeof host - 1), 0);
  auto written_by = [&](uint32_t pid, const std::string& hostname, bool close) {
    TempTrace file("writer");
    {
      TraceWriterOptions options;
      options.pid = pid;
      options.hostname = hostname;
      SyntheticTrace t(file.path, options);
      t.alloc(0, 0x10, 1);
      t.close(close);
    }
    return analyze_trace(file.path).trace;
  };
  const uint32_t self = static_cast<uint32_t>(getpid());
  EXPECT_TRUE(written_by(self, host, false).being_written);
  EXPECT_FALSE(written_by(self, host, true).being_written);             // closed
  EXPECT_FALSE(written_by(self, "another-host", false).being_written);  // cannot be asked
  EXPECT_FALSE(written_by(0, host, false).being_written);
}

TEST(AnalysisGolden, NotATraceThrowsTraceError) {
  TempTrace file("garbage");
  {
    FILE* f = std::fopen(file.path.c_str(), "wb");
    std::fputs("this is not a trace at all, just some text\n", f);
    std::fclose(f);
  }
  try {
    analyze_trace(file.path);
    FAIL() << "expected TraceError";
  } catch (const TraceError& e) {
    EXPECT_EQ(e.offset(), 0u);
    EXPECT_NE(std::string(e.what()).find(file.path), std::string::npos);
  }
}

}  // namespace
}  // namespace psc
