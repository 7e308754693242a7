// What the Perfetto exporter writes its packets through: the interning
// tables of one trusted packet sequence and the zlib bundles the packets go
// out in (exchange/perfetto/export_perfetto.cc says why each).
#pragma once

#include <libdeflate.h>
#include <condition_variable>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "analysis/categories.h"
#include "exchange/export_output.h"
#include "exchange/perfetto/perfetto_schema.h"
#include "exchange/perfetto/protobuf.h"
#include "traces/reader.h"

namespace psc::perfetto {

// One InternedData table: iids from 1 in order of first use.
class InternTable {
 public:
  // `fresh` is set when this is the key's first use: the caller interns it.
  uint64_t iid(size_t key, bool* fresh) {
    if (key >= iids_.size()) iids_.resize(key + 1, 0);
    *fresh = iids_[key] == 0;
    if (*fresh) iids_[key] = next_++;
    return iids_[key];
  }

 private:
  std::vector<uint64_t> iids_;  // by key; 0 until interned
  uint64_t next_ = 1;
};

// Argument names of our own (DebugAnnotationName).
enum Arg : size_t { kArgBytes, kArgAddress, kArgRange, kArgPayload };

// The sequence's InternedData: iids of event names (the categories, then the
// trace's strings), argument names and string values, each interned on first
// use; pending() holds the entries the packet being built names first.
class Interning {
 public:
  uint64_t category(Category c);
  uint64_t name(StringId id, const TraceMeta& meta);
  uint64_t arg(Arg arg);
  uint64_t string_value(StringId id, const TraceMeta& meta);
  const proto::Buffer& pending() const { return pending_; }
  void clear_pending() { pending_.clear(); }

 private:
  void add(uint32_t table, uint64_t iid, std::string_view name);

  InternTable event_names_, arg_names_, string_values_;
  proto::Buffer pending_, entry_;
};

// Slice tracks under one parent, "lane 0", "lane 1", ..., described as first used.
struct LaneGroup {
  uint64_t uuid = 0;  // the parent; 0 until described
  std::vector<uint64_t> lanes;
};

// The two counter tracks an allocation moves (0: no track).
struct CounterPair {
  uint64_t category_track = 0, total_track = 0;
  bool operator==(const CounterPair& o) const {
    return category_track == o.category_track && total_track == o.total_track;
  }
};

// Consecutive events naming the same value: long enough, and the value
// becomes the sequence's default (the writer's "defaults" section says why).
template <typename T>
struct SameValueRun {
  static constexpr uint32_t kDefaultsAfter = 4;
  T value{};
  uint32_t length = 0;
  bool extend(const T& v) {  // true when the run is long enough to become the default
    length = v == value ? length + 1 : 1;
    value = v;
    return length >= kDefaultsAfter;
  }
};

// Packets as Perfetto's tracing service writes them with compression on
// (src/tracing/service/zlib_compressor.cc): a run of packets, each framed as
// Trace.packet, deflated into one zlib stream, the compressed_packets of one
// outer packet that holds nothing else. trace_processor inflates a bundle and
// parses each packet in it as if it stood at the top level, on the same
// sequence state (src/trace_processor/importers/proto/proto_trace_reader.cc,
// ParseCompressedPackets), so interning, defaults and the delta clock run on
// across bundles; a packet is never split between two.
//
// Each bundle is deflated whole, in one call, by libdeflate, into a zlib
// stream (RFC 1950) as the service's zlib makes: trace_processor inflates it
// with zlib like any other. libdeflate, not zlib, because the export waits on
// it: measured side by side on the same packets (docs/viewers.md, "Size"),
// its level 1 deflates them about twice as fast as zlib's level 1, into 2-8%
// fewer bytes.
//
// Memory: the packets of one bundle and their compressed bytes, about
// 2 x kBundleBytes, plus a compressor per thread (a few hundred KiB).
class PacketBundles {
 public:
  // 256 KiB of packets deflate to at most 256 KiB and some bytes
  // (libdeflate_zlib_compress_bound), under the 512 KB trace_packet.proto asks of an outer
  // packet. The size hardly matters: on a training-like trace 64 KiB bundles
  // take 0.5% more bytes, 512 KiB ones 0.05% fewer.
  static constexpr size_t kBundleBytes = 256 << 10;
  // libdeflate's level (1 to 12), its fastest. Measured on the packets of a
  // recorded training step: level 2 takes 3.5% fewer bytes at 1.4 times the
  // time, level 6 13% fewer at three times; the export waits on it.
  static constexpr int kLevel = 1;

  // Bundles deflate on threads of their own while the packets of the next
  // ones are made (each bundle is a stream of its own: they deflate side by
  // side); they are written to `out` in order, on the calling thread, as
  // each is done. At most kMaxThreads threads, one fewer than the
  // processors (at least one).
  static constexpr unsigned kMaxThreads = 4;
  explicit PacketBundles(OutputFile& out);
  ~PacketBundles();  // stops the threads; bundles not yet written are dropped (finish() writes them)
  PacketBundles(const PacketBundles&) = delete;
  PacketBundles& operator=(const PacketBundles&) = delete;

  void add(const proto::Buffer& packet) {
    // A packet bigger than a bundle goes alone: a bundle holds whole packets.
    constexpr size_t kFraming = 1 + 10;  // Trace.packet's key and the length's varint, at most
    if (!pending_.empty() && pending_.size() + packet.size() + kFraming > kBundleBytes) flush();
    pending_.message(trace::kPacket, packet);
  }

  // Hands the pending packets to be deflated into one outer packet, and
  // writes the bundles deflated so far.
  void flush();
  // flush(), then waits for every bundle and writes it: the file is whole.
  void finish();

 private:
  struct Job {
    std::string packets;
    std::string compressed;  // the compress bound of kBundleBytes, grown for a bigger lone packet
    size_t size = 0;         // of compressed
    bool done = false;
    std::exception_ptr error;
  };
  void work();
  // Writes the finished bundles at the head of the line; with `wait`, the
  // head's too, waiting for it.
  void write_done(bool wait);
  // Trace.packet { compressed_packets: the job's bytes }, its headers written
  // before the bytes instead of copying them into a Buffer.
  void write_outer(const Job& job);

  OutputFile& out_;
  proto::Buffer pending_;  // framed packets, up to kBundleBytes
  proto::Buffer outer_, field_;
  std::mutex mutex_;
  std::condition_variable work_ready_;
  std::condition_variable job_done_;
  std::deque<std::unique_ptr<Job>> line_;  // handed over, in file order
  std::deque<Job*> todo_;                  // of those, not yet taken by a thread
  std::vector<std::unique_ptr<Job>> spare_;
  std::vector<std::thread> threads_;
  size_t max_in_flight_ = 2;
  bool stop_ = false;
};

}  // namespace psc::perfetto
