// Fixtures shared by the exporter and importer tests: a temporary directory
// and one small trace that exercises everything an exporter must carry — a
// LoRA step on two threads (forward / recompute / backward / optimizer), two
// waves with payloads, a process-wide start/end range, marks, a sampled
// counter, both memory levels, a second device, a nested and a failed event,
// an unmatched free, an allocation replaced at a live address, and allocations
// still live at the end. Its answers come from the analysis, never from here.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>

#include "tests/support/synthetic_trace.h"

namespace psc::test {

class TempDir {
 public:
  TempDir() {
    static int counter = 0;
    path_ = std::filesystem::temp_directory_path() /
            ("psc_export_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  std::string file(const std::string& name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

inline std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

inline void write_file(const std::string& path, const std::string& data) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(data.data(), static_cast<std::streamsize>(data.size()));
}

// The golden directory, from the repository root (tests run from there) or
// from PSC_SOURCE_DIR.
inline std::string golden_path(const std::string& name) {
  const char* root = std::getenv("PSC_SOURCE_DIR");
  return (root ? std::string(root) + "/" : std::string()) + "tests/golden/" + name;
}

// Compares `actual` with the golden file; PSC_UPDATE_GOLDEN=1 rewrites it
// instead (then review the diff before committing it).
inline ::testing::AssertionResult matches_golden(const std::string& name, const std::string& actual) {
  const std::string path = golden_path(name);
  if (std::getenv("PSC_UPDATE_GOLDEN")) {
    write_file(path, actual);
    return ::testing::AssertionSuccess() << "updated " << path;
  }
  if (!std::filesystem::exists(path))
    return ::testing::AssertionFailure() << path << " is missing (run with PSC_UPDATE_GOLDEN=1 to create it)";
  const std::string expected = read_file(path);
  if (expected == actual) return ::testing::AssertionSuccess();
  size_t at = 0;
  while (at < expected.size() && at < actual.size() && expected[at] == actual[at]) ++at;
  const size_t from = at > 80 ? at - 80 : 0;
  return ::testing::AssertionFailure() << path << " differs at byte " << at << "\nexpected: ..."
                                       << expected.substr(from, 200) << "\nactual:   ..." << actual.substr(from, 200);
}

// The fixture trace described at the top of this file.
// monotonic_raw_ns: the header's CLOCK_MONOTONIC_RAW sample (0: none, as
// recorders before it wrote).
inline void write_fixture_trace(const std::string& path, uint64_t monotonic_raw_ns = 0) {
  TraceWriterOptions options;
  options.monotonic_raw_ns = monotonic_raw_ns;
  options.pid = 4242;
  options.realtime_ns = 1'700'000'000'000'000'000ull;
  options.monotonic_ns = SyntheticTrace::kStartTimeNs;
  options.command = "python train_lora.py --layers 3";
  SyntheticTrace t(path, options);
  constexpr uint32_t kMain = 0, kWorker = 1;
  t.name_thread(kMain, "MainThread", 5001);
  t.name_thread(kWorker, "autograd-worker", 5002);

  SyntheticTrace::Memory reserved;
  reserved.flags = kFlagReserved;
  SyntheticTrace::Memory nested;
  nested.flags = kFlagNested;
  nested.api = Api::kCuMemAlloc;
  SyntheticTrace::Memory failed;
  failed.flags = kFlagFailed;
  SyntheticTrace::Memory device1;
  device1.device = 1;

  t.alloc(kMain, 0x7000000, 8u << 20, reserved);  // a segment of the caching allocator
  t.alloc(kMain, 0x1000, 4000);                   // weights: persistent
  t.alloc(kMain, 0x2000, 300);                    // optimizer state
  t.alloc(kMain, 0x9000, 777, device1);           // another device, never freed
  t.counter(kMain, "reserved_bytes", 8u << 20);
  t.range_start(kMain, 77, "step 0", "{\"step\":0}");

  for (int wave = 0; wave < 2; ++wave) {
    const uint64_t base = 0x100000 * static_cast<uint64_t>(wave + 1);
    const uint64_t s = wave == 0 ? 10 : 12;
    t.wave_begin(kMain, wave == 0 ? R"({"tokens": 1024, "slots": ["a"], "groups": 1, "cold": true})"
                                  : R"({"tokens": 1536, "slots": ["a"], "groups": 1, "cold": false})");
    t.push(kMain, "head/embedding");
    t.alloc(kMain, base + 1, 100 * s);  // boundary(0)
    t.pop(kMain);
    for (int layer = 0; layer < 3; ++layer) {
      t.push(kMain, "forward/layer." + std::to_string(layer));
      t.alloc(kMain, base + 10 + layer, 5 * s);            // forward temporary
      t.alloc(kMain, base + 20 + layer, 100 * s + layer);  // boundary(layer + 1)
      t.alloc(kMain, base + 30 + layer, 64, nested);       // nested: not counted
      t.free(kMain, base + 10 + layer);
      t.pop(kMain);
    }
    t.push(kMain, "head/loss");
    t.alloc(kMain, base + 40, 50 * s);
    t.alloc(kMain, base + 41, 1u << 30, failed);  // an OOM that was survived
    t.pop(kMain);
    for (int layer = 2; layer >= 0; --layer) {
      const std::string l = std::to_string(layer);
      t.push(kWorker, "recompute/layer." + l);
      t.alloc(kWorker, base + 50 + layer, 70 * s);  // workspace
      t.pop(kWorker);
      t.push(kWorker, "backward/layer." + l);
      if (wave == 0) t.alloc(kWorker, 0x3000 + layer, 200 + layer);  // adapter gradient, lives to the optimizer
      t.free(kWorker, base + 50 + layer);
      t.free(kWorker, base + (layer == 0 ? 1 : 20 + layer - 1));  // the boundary this layer consumed
      t.pop(kWorker);
    }
    t.free(kMain, base + 22);
    t.free(kMain, base + 40);
    t.mark(kMain, "loss", "{\"value\": 2.5}");
    t.wave_end(kMain);
  }
  t.range_end(kMain, 77);
  t.free(kMain, 0xdead);  // unmatched
  t.push(kMain, "optimizer/step");
  t.alloc(kMain, 0x4000, 123);
  t.alloc(kMain, 0x4000, 456);  // replaced: the first free was lost
  for (int layer = 0; layer < 3; ++layer) t.free(kMain, 0x3000 + layer);
  t.free(kMain, 0x4000);
  t.pop(kMain);
  t.free(kMain, 0x7000000, reserved);
  t.alloc(kMain, 0x7100000, 4u << 20, reserved);
  t.close();
}

}  // namespace psc::test
