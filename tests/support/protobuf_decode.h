// A minimal protobuf reader for the tests of the Perfetto export (no protobuf
// library, no trace_processor on Debian): fields of a message, and a Perfetto
// file's packets with every compressed_packets bundle inflated in its place,
// as trace_processor reads them.
#pragma once

#include <zlib.h>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace psc {

// ---- a minimal protobuf reader -------------------------------------------------

struct Field {
  uint32_t number = 0;
  uint32_t wire = 0;
  uint64_t value = 0;      // varint / fixed
  std::string_view bytes;  // length-delimited
};

inline std::vector<Field> decode(std::string_view data) {
  std::vector<Field> out;
  size_t i = 0;
  auto varint = [&]() {
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (i >= data.size()) throw std::runtime_error("truncated varint");
      const uint8_t b = static_cast<uint8_t>(data[i++]);
      v |= static_cast<uint64_t>(b & 0x7f) << shift;
      if (!(b & 0x80)) return v;
    }
    throw std::runtime_error("varint too long");
  };
  while (i < data.size()) {
    const uint64_t key = varint();
    Field f;
    f.number = static_cast<uint32_t>(key >> 3);
    f.wire = static_cast<uint32_t>(key & 7);
    if (f.number == 0) throw std::runtime_error("field number 0");
    switch (f.wire) {
      case 0: f.value = varint(); break;
      case 1:
        if (i + 8 > data.size()) throw std::runtime_error("truncated fixed64");
        i += 8;
        break;
      case 2: {
        const uint64_t n = varint();
        if (n > data.size() - i) throw std::runtime_error("length past the end");
        f.bytes = data.substr(i, n);
        i += n;
        break;
      }
      case 5:
        if (i + 4 > data.size()) throw std::runtime_error("truncated fixed32");
        i += 4;
        break;
      default: throw std::runtime_error("bad wire type " + std::to_string(f.wire));
    }
    out.push_back(f);
  }
  return out;
}

inline const Field* find(const std::vector<Field>& fields, uint32_t number) {
  for (const Field& f : fields)
    if (f.number == number) return &f;
  return nullptr;
}
inline uint64_t value_of(const std::vector<Field>& fields, uint32_t number, uint64_t missing = 0) {
  const Field* f = find(fields, number);
  return f ? f->value : missing;
}
inline std::vector<uint64_t> values_of(const std::vector<Field>& fields, uint32_t number) {
  std::vector<uint64_t> out;
  for (const Field& f : fields)
    if (f.number == number && f.wire == 0) out.push_back(f.value);
  return out;
}

// ---- compressed_packets ----------------------------------------------------------

// A zlib stream (RFC 1950), whole: raw deflate or a truncated stream throws.
inline std::string inflate_zlib(std::string_view compressed) {
  z_stream stream{};
  if (inflateInit(&stream) != Z_OK) throw std::runtime_error("inflateInit failed");
  stream.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(compressed.data()));
  stream.avail_in = static_cast<uInt>(compressed.size());
  std::string out;
  char buffer[16384];
  int status = Z_OK;
  while (status != Z_STREAM_END) {
    stream.next_out = reinterpret_cast<Bytef*>(buffer);
    stream.avail_out = sizeof buffer;
    status = inflate(&stream, Z_NO_FLUSH);
    if (status != Z_OK && status != Z_STREAM_END) {
      inflateEnd(&stream);
      throw std::runtime_error("not a whole zlib stream (inflate: " + std::to_string(status) + ")");
    }
    out.append(buffer, sizeof buffer - stream.avail_out);
  }
  const bool trailing = stream.avail_in != 0;
  inflateEnd(&stream);
  if (trailing) throw std::runtime_error("bytes after the zlib stream");
  return out;
}

// One outer packet's compressed_packets.
struct Bundle {
  size_t outer_bytes = 0;     // the outer packet with its Trace.packet key and length
  size_t inflated_bytes = 0;  // the Trace it holds
  uint64_t packets = 0;
  bool only_field = false;  // compressed_packets is all the outer packet holds
  bool zlib_header = false;
};

// The file's packets with every compressed_packets bundle inflated in its
// place, as trace_processor reads them (proto_trace_reader.cc): the
// Trace.packet fields of a `Trace`, and what each bundle held.
struct Expanded {
  std::string packets;
  std::vector<Bundle> bundles;
  uint64_t plain_packets = 0;  // top-level packets that were not bundles
};

inline Expanded expand(const std::string& file) {
  Expanded x;
  size_t next = 0;  // where the next top-level field starts
  for (const Field& outer : decode(file)) {
    if (outer.number != 1 || outer.wire != 2) throw std::runtime_error("top-level field is not Trace.packet");
    const size_t end = static_cast<size_t>(outer.bytes.data() - file.data()) + outer.bytes.size();
    const std::string_view framed = std::string_view(file).substr(next, end - next);  // key, length, packet
    next = end;
    const std::vector<Field> fields = decode(outer.bytes);
    const Field* compressed = find(fields, 50);
    if (!compressed) {
      ++x.plain_packets;
      x.packets += framed;
      continue;
    }
    Bundle b;
    b.outer_bytes = framed.size();
    b.only_field = fields.size() == 1 && compressed->wire == 2;
    const std::string_view z = compressed->bytes;
    // CMF 0x78: deflate with a 32 KiB window; CMF * 256 + FLG a multiple of 31.
    b.zlib_header = z.size() >= 2 && static_cast<uint8_t>(z[0]) == 0x78 &&
                    (static_cast<uint8_t>(z[0]) * 256 + static_cast<uint8_t>(z[1])) % 31 == 0;
    const std::string inflated = inflate_zlib(z);
    b.inflated_bytes = inflated.size();
    for (const Field& inner : decode(inflated)) {  // throws on a packet cut at the bundle's end
      if (inner.number != 1 || inner.wire != 2) throw std::runtime_error("a bundle holds a field other than packet");
      if (find(decode(inner.bytes), 50)) throw std::runtime_error("a bundle inside a bundle");
      ++b.packets;
    }
    x.packets += inflated;
    x.bundles.push_back(b);
  }
  return x;
}

}  // namespace psc
