#include "format/crc32c.h"

#include <cstring>

namespace psc {
namespace {

struct Table {
  uint32_t entries[8][256];
  constexpr Table() : entries{} {
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c >> 1) ^ (0x82f63b78u & (0u - (c & 1)));
      entries[0][i] = c;
    }
    for (uint32_t i = 0; i < 256; ++i)
      for (int t = 1; t < 8; ++t) entries[t][i] = (entries[t - 1][i] >> 8) ^ entries[0][entries[t - 1][i] & 0xff];
  }
};
constexpr Table kTable;

uint32_t crc32c_table(const uint8_t* p, size_t n, uint32_t crc) {
  while (n >= 8) {
    uint64_t word;
    std::memcpy(&word, p, 8);
    word ^= crc;
    crc = kTable.entries[7][word & 0xff] ^ kTable.entries[6][(word >> 8) & 0xff] ^
          kTable.entries[5][(word >> 16) & 0xff] ^ kTable.entries[4][(word >> 24) & 0xff] ^
          kTable.entries[3][(word >> 32) & 0xff] ^ kTable.entries[2][(word >> 40) & 0xff] ^
          kTable.entries[1][(word >> 48) & 0xff] ^ kTable.entries[0][word >> 56];
    p += 8;
    n -= 8;
  }
  while (n--) crc = (crc >> 8) ^ kTable.entries[0][(crc ^ *p++) & 0xff];
  return crc;
}

#if defined(__x86_64__)
__attribute__((target("sse4.2"))) uint32_t crc32c_sse42(const uint8_t* p, size_t n, uint32_t crc) {
  uint64_t c = crc;
  while (n >= 8) {
    uint64_t word;
    std::memcpy(&word, p, 8);
    c = __builtin_ia32_crc32di(c, word);
    p += 8;
    n -= 8;
  }
  uint32_t c32 = static_cast<uint32_t>(c);
  while (n--) c32 = __builtin_ia32_crc32qi(c32, *p++);
  return c32;
}
bool has_sse42() {
  static const bool present = __builtin_cpu_supports("sse4.2");
  return present;
}
#endif

}  // namespace

uint32_t crc32c(const void* data, size_t size, uint32_t crc) {
  const auto* p = static_cast<const uint8_t*>(data);
  crc = ~crc;
#if defined(__x86_64__)
  if (has_sse42()) return ~crc32c_sse42(p, size, crc);
#endif
  return ~crc32c_table(p, size, crc);
}

}  // namespace psc
