// The Perfetto export's speed and size on a synthetic training-like trace
// (written once with the recorder's encoder): 4 threads, each with a range per
// "layer" that changes every 256 allocations, a working set of 2048 live
// blocks per thread so frees hit blocks allocated long before (many lanes),
// sizes from 512 bytes to 1 MiB, and a reserved segment now and then.
// Reports bytes per trace event of the .pftrace (docs/viewers.md: "Size"), and
// of its packets before compression (the compressed_packets bundles inflated).
//
//   build/benchmarks --benchmark_filter=ExportPerfetto
//   PEAKSCOPE_BENCH_EVENTS=8000000 build/benchmarks ...   (default 1 M events)
#include <benchmark/benchmark.h>
#include <unistd.h>
#include <zlib.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <string>
#include <string_view>

#include "exchange/exporter.h"
#include "tests/support/synthetic_trace.h"

namespace psc {
namespace {

uint64_t export_bench_events() {
  const char* text = std::getenv("PEAKSCOPE_BENCH_EVENTS");
  const uint64_t n = text ? std::strtoull(text, nullptr, 10) : 0;
  return n > 0 ? n : 1'000'000;
}

uint64_t read_varint(std::string_view data, size_t* at) {
  uint64_t v = 0;
  for (int shift = 0; *at < data.size() && shift < 64; shift += 7) {
    const uint8_t b = static_cast<uint8_t>(data[(*at)++]);
    v |= static_cast<uint64_t>(b & 0x7f) << shift;
    if (!(b & 0x80)) return v;
  }
  throw std::runtime_error("bad varint");
}

// The bytes of a .pftrace's packets with its bundles inflated: each top-level
// packet is Trace.packet (key 0x0a) holding only compressed_packets (50, key
// 0x92 0x03), a zlib stream.
uint64_t inflated_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  const std::string file((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  uint64_t total = 0;
  size_t at = 0;
  while (at < file.size()) {
    if (file[at++] != '\x0a') throw std::runtime_error("not Trace.packet");
    const size_t end = read_varint(file, &at) + at;
    if (file.compare(at, 2, "\x92\x03") != 0) throw std::runtime_error("not compressed_packets");
    at += 2;
    const uint64_t size = read_varint(file, &at);
    z_stream stream{};
    inflateInit(&stream);
    stream.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(file.data() + at));
    stream.avail_in = static_cast<uInt>(size);
    char buffer[1 << 16];
    int status = Z_OK;
    while (status == Z_OK) {
      stream.next_out = reinterpret_cast<Bytef*>(buffer);
      stream.avail_out = sizeof buffer;
      status = inflate(&stream, Z_NO_FLUSH);
      total += sizeof buffer - stream.avail_out;
    }
    inflateEnd(&stream);
    if (status != Z_STREAM_END) throw std::runtime_error("bad zlib stream");
    at = end;
  }
  return total;
}

class ExportBenchTrace {
 public:
  ExportBenchTrace() {
    const std::string stem =
        (std::filesystem::temp_directory_path() / ("psc_export_bench_" + std::to_string(::getpid()))).string();
    path_ = stem + ".pstrace";
    output_ = stem + ".pftrace";
    SyntheticTrace t(path_);
    constexpr uint32_t kThreads = 4;
    constexpr uint64_t kWorkingSet = 2048;
    SyntheticTrace::Memory reserved;
    reserved.flags = kFlagReserved;
    uint64_t rng = 0x2545F4914F6CDD1Dull;
    uint64_t allocations = 0;
    while (t.events() < export_bench_events()) {
      const uint32_t thread = static_cast<uint32_t>(allocations % kThreads);
      const uint64_t own = allocations / kThreads;  // this thread's allocations so far
      if (own % 256 == 0) {
        if (own) t.pop(thread);
        t.push(thread, "forward/layer." + std::to_string((own / 256) % 32));
      }
      if (allocations % 4096 == 0) t.alloc(thread, 0x7e0000000000ull + allocations * (2u << 20), 2u << 20, reserved);
      rng ^= rng << 13;
      rng ^= rng >> 7;
      rng ^= rng << 17;
      const uint64_t slot = rng % kWorkingSet;
      const uint64_t address = 0x7f0000000000ull + (static_cast<uint64_t>(thread) << 32) + (slot << 20);
      if (live_[thread][slot]) t.free(thread, address);
      t.alloc(thread, address, 512 + (rng >> 44));  // up to 1 MiB
      live_[thread][slot] = true;
      ++allocations;
    }
    t.close();
    events_ = t.events();
  }
  ~ExportBenchTrace() {
    std::remove(path_.c_str());
    std::remove(output_.c_str());
  }
  const std::string& path() const { return path_; }
  const std::string& output() const { return output_; }
  uint64_t events() const { return events_; }

 private:
  std::string path_, output_;
  uint64_t events_ = 0;
  bool live_[4][2048] = {};
};

void BM_ExportPerfetto(benchmark::State& state) {
  static const ExportBenchTrace trace;
  ExportOptions options;
  options.trace = trace.path();
  options.output = trace.output();
  uint64_t events = 0;
  for (auto _ : state) {
    find_exporter("perfetto")->write(options);
    events += trace.events();
  }
  const double n = static_cast<double>(trace.events());
  state.counters["events/s"] = benchmark::Counter(static_cast<double>(events), benchmark::Counter::kIsRate);
  state.counters["bytes/event"] = static_cast<double>(std::filesystem::file_size(trace.output())) / n;
  state.counters["inflated bytes/event"] = static_cast<double>(inflated_bytes(trace.output())) / n;
  state.counters["events"] = static_cast<double>(trace.events());
}
BENCHMARK(BM_ExportPerfetto)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
}  // namespace psc
