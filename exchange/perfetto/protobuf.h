// Protocol Buffers wire format, by hand: no protobuf library is installed and
// the Perfetto exporter needs only varints and length-delimited fields.
// https://protobuf.dev/programming-guides/encoding/ : a field is a key
// (field_number << 3 | wire_type) followed by a varint (wire type 0) or a
// varint length and that many bytes (wire type 2).
//
// Messages are built bottom-up: a nested message is encoded into its own
// buffer, then appended to its parent as bytes. The buffers are reused, so the
// steady state allocates nothing.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace psc::proto {

constexpr uint32_t kWireVarint = 0;
constexpr uint32_t kWireBytes = 2;

class Buffer {
 public:
  void clear() { data_.clear(); }
  bool empty() const { return data_.empty(); }
  size_t size() const { return data_.size(); }
  const std::string& data() const { return data_; }
  // Trades the bytes for `other`'s (a buffer handed to another thread and back).
  void swap_data(std::string& other) { data_.swap(other); }

  void raw_varint(uint64_t v) {
    char tmp[10];
    size_t n = 0;
    while (v >= 0x80) {
      tmp[n++] = static_cast<char>(v | 0x80);
      v >>= 7;
    }
    tmp[n++] = static_cast<char>(v);
    data_.append(tmp, n);
  }
  void key(uint32_t field, uint32_t wire) { raw_varint((static_cast<uint64_t>(field) << 3) | wire); }

  // uint32/uint64/int32/int64/enum/bool fields all use plain varints; a
  // negative int64 is its two's complement (ten bytes).
  void varint(uint32_t field, uint64_t v) {
    key(field, kWireVarint);
    raw_varint(v);
  }
  void int64(uint32_t field, int64_t v) { varint(field, static_cast<uint64_t>(v)); }
  void bytes(uint32_t field, std::string_view s) {
    key(field, kWireBytes);
    raw_varint(s.size());
    data_.append(s.data(), s.size());
  }
  void string(uint32_t field, std::string_view s) { bytes(field, s); }
  void message(uint32_t field, const Buffer& m) { bytes(field, m.data_); }

 private:
  std::string data_;
};

}  // namespace psc::proto
