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

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

namespace psc::proto {

constexpr uint32_t kWireVarint = 0;
constexpr uint32_t kWireBytes = 2;

class Buffer {
 public:
  void clear() { used_ = 0; }
  bool empty() const { return used_ == 0; }
  size_t size() const { return used_; }
  std::string_view data() const { return {data_.data(), used_}; }
  // Trades the bytes for `other`'s (a buffer handed to another thread and
  // back): `other` gets exactly the bytes written, this buffer takes
  // `other`'s as its own and its whole capacity as room.
  void swap_data(std::string& other) {
    data_.resize(used_);
    data_.swap(other);
    used_ = data_.size();
    data_.resize(data_.capacity());
  }

  void raw_varint(uint64_t v) {
    char* out = room(10);
    size_t n = 0;
    while (v >= 0x80) {
      out[n++] = static_cast<char>(v | 0x80);
      v >>= 7;
    }
    out[n++] = static_cast<char>(v);
    used_ += n;
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
    if (s.empty()) return;
    std::memcpy(room(s.size()), s.data(), s.size());
    used_ += s.size();
  }
  void string(uint32_t field, std::string_view s) { bytes(field, s); }
  void message(uint32_t field, const Buffer& m) { bytes(field, m.data()); }

 private:
  // Where the next `n` bytes go: the string is kept at its capacity and
  // `used_` counts what is written, so a field is stored without a call into
  // std::string (appending each varint was a sixth of the export's time).
  // The test and the pointer inline into every field; growing, which a
  // reused buffer rarely does, stays out of line (inlined whole, the resize
  // made `room` a call of its own per field, a twentieth of the export).
  __attribute__((always_inline)) char* room(size_t n) {
    if (__builtin_expect(used_ + n > data_.size(), 0)) grow(n);
    return data_.data() + used_;
  }
  __attribute__((noinline)) void grow(size_t n) { data_.resize(std::max(2 * data_.size(), used_ + n + 64)); }

  std::string data_;  // [0, used_) written; the rest is room
  size_t used_ = 0;
};

}  // namespace psc::proto
