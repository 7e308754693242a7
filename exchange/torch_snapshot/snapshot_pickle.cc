#include "exchange/torch_snapshot/snapshot_pickle.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <initializer_list>
#include <stdexcept>
#include <string>

#include "exchange/torch_snapshot/snapshot_shared.h"

namespace psc {

ListFile::ListFile(uint64_t* memo) : writer_(memo) {
  std::string name = std::filesystem::temp_directory_path().string() + "/peakscope-pickle-XXXXXX";
  fd_ = ::mkstemp(name.data());
  if (fd_ < 0) throw std::runtime_error(std::string("cannot create a temporary file: ") + std::strerror(errno));
  ::unlink(name.c_str());
  writer_.empty_list();
}

void ListFile::done() {
  if (++in_batch_ == pickle::kBatch) close_batch();
  if (writer_.out().size() > (1u << 20)) flush();
}

void ListFile::copy_to(OutputFile& out) {
  close_batch();
  flush();
  std::vector<char> buf(1u << 20);
  for (off_t at = 0;;) {
    const ssize_t r = ::pread(fd_, buf.data(), buf.size(), at);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) throw std::runtime_error(std::string("temporary pickle: read failed: ") + std::strerror(errno));
    if (r == 0) break;
    out.write(buf.data(), static_cast<size_t>(r));
    at += r;
  }
}

void ListFile::close_batch() {
  if (in_batch_ == 0) return;
  writer_.appends();
  in_batch_ = 0;
}
void ListFile::flush() {
  const std::string& s = writer_.out();
  size_t done = 0;
  while (done < s.size()) {
    const ssize_t w = ::write(fd_, s.data() + done, s.size() - done);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) throw std::runtime_error(std::string("temporary pickle: write failed: ") + std::strerror(errno));
    done += static_cast<size_t>(w);
  }
  writer_.clear();
}

// A JSON value as the pickle Python would write for it.
void json_value(pickle::Writer& w, const nlohmann::ordered_json& v, int depth) {
  if (depth > 32 || v.is_null()) {
    w.none();
  } else if (v.is_boolean()) {
    w.boolean(v.get<bool>());
  } else if (v.is_number_unsigned()) {
    w.integer(v.get<uint64_t>());
  } else if (v.is_number_integer()) {
    w.integer(v.get<int64_t>());
  } else if (v.is_number_float()) {
    w.real(v.get<double>());
  } else if (v.is_string()) {
    w.string(v.get<std::string>());
  } else if (v.is_array()) {
    w.empty_list();
    for (size_t i = 0; i < v.size(); ++i) {
      if (i % pickle::kBatch == 0) w.mark();
      json_value(w, v[i], depth + 1);
      if (i % pickle::kBatch == pickle::kBatch - 1 || i + 1 == v.size()) w.appends();
    }
  } else {
    w.empty_dict();
    if (v.empty()) return;
    w.mark();
    for (const auto& [k, item] : v.items()) {
      w.interned(k);
      if (k == "segment_pool_id" && item.is_array() && item.size() == 2) {
        json_value(w, item[0], depth + 1);  // PyTorch writes a tuple
        json_value(w, item[1], depth + 1);
        w.tuple2();
      } else {
        json_value(w, item, depth + 1);
      }
    }
    w.setitems();
  }
}

void write_extra(pickle::Writer& w, const nlohmann::ordered_json& j) {
  for (const auto& [k, v] : j.items()) {
    if (k == "action" || k == "addr" || k == "size" || k == "stream" || k == "device_free" || k == "time_us" ||
        k == "frames")
      continue;  // written already
    w.interned(k);
    json_value(w, v);
  }
}

// The segments a snapshot import kept, as they were.
void write_recorded_segments(pickle::Writer& w, std::vector<nlohmann::ordered_json>& segment_marks) {
  nlohmann::ordered_json list = nlohmann::ordered_json::array();
  for (nlohmann::ordered_json& s : segment_marks) {
    s["frames"] = nlohmann::ordered_json::array();
    if (s.contains("blocks") && s["blocks"].is_array())
      for (nlohmann::ordered_json& b : s["blocks"])
        if (b.is_object()) b["frames"] = nlohmann::ordered_json::array();
    list.push_back(std::move(s));
  }
  json_value(w, list);
}

namespace {

void write_segment(pickle::Writer& w, const EndSegment& seg, const std::vector<std::pair<uint64_t, uint64_t>>& inside,
                   uint64_t active) {
  const uint64_t seg_end = MappedRanges::end_of(seg.address, seg.bytes);
  w.empty_dict();
  w.mark();
  for (const auto& [k, v] : std::initializer_list<std::pair<const char*, uint64_t>>{
           {"device", static_cast<uint64_t>(std::max<int16_t>(seg.device, 0))},
           {"address", seg.address},
           {"total_size", seg.bytes},
           {"allocated_size", active},
           {"active_size", active},
           {"requested_size", active},
           {"stream", seg.stream}}) {
    w.interned(k);
    w.integer(v);
  }
  w.interned("segment_type");
  w.interned(seg.bytes >= (1u << 20) ? "large" : "small");
  w.interned("segment_pool_id");
  w.integer(int64_t{0});
  w.integer(int64_t{0});
  w.tuple2();
  w.interned("is_expandable");
  w.boolean(seg.expandable);
  w.interned("frames");
  w.empty_list();
  w.interned("blocks");
  w.empty_list();
  w.mark();
  size_t in_blocks = 0;
  auto block = [&](uint64_t address, uint64_t size, bool allocated) {
    w.empty_dict();
    w.mark();
    w.interned("address");
    w.integer(address);
    w.interned("size");
    w.integer(size);
    w.interned("requested_size");
    w.integer(allocated ? size : 0);
    w.interned("state");
    w.interned(allocated ? "active_allocated" : "inactive");
    w.interned("frames");
    w.empty_list();
    w.setitems();
    if (++in_blocks % pickle::kBatch == 0) {
      w.appends();
      w.mark();
    }
  };
  uint64_t at = seg.address;
  for (const auto& [address, size] : inside) {
    if (address > at) block(at, address - at, false);
    block(address, size, true);
    at = address + size;
  }
  if (at < seg_end) block(at, seg_end - at, false);
  w.appends();
  w.setitems();
}

}  // namespace

void write_segments(pickle::Writer& w, const std::vector<EndSegment>& segments,
                    const std::function<std::vector<std::pair<uint64_t, uint64_t>>(const EndSegment&)>& allocated) {
  w.empty_list();
  size_t in_batch = 0;
  for (const EndSegment& seg : segments) {
    if (in_batch == 0) w.mark();
    const std::vector<std::pair<uint64_t, uint64_t>> inside = allocated(seg);
    uint64_t active = 0;
    for (const auto& [address, size] : inside) active += size;
    write_segment(w, seg, inside, active);
    if (++in_batch == pickle::kBatch) {
      w.appends();
      in_batch = 0;
    }
  }
  if (in_batch) w.appends();
}

}  // namespace psc
