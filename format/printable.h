// Paths in one-line messages, shared by the recorder (heap-free) and the
// reading half. A file name may hold any byte but '/' and NUL: a newline in
// one splits a message into two lines, and bytes that are not UTF-8 cannot be
// shown at all. So a path in a message is escaped as bash's $'...' quoting
// escapes: \n \t \r, \\ for a backslash, \xNN for every other control byte
// (C0, DEL, and the two bytes of each C1 control U+0080..U+009F) and for
// every byte that is not part of well-formed UTF-8; everything else is left
// as it is. The result is one line that names the bytes exactly: $'RESULT'
// in a shell is the path again (docs/recorder.md, "Paths in messages").
#pragma once

#include <cstddef>
#include <cstdint>

namespace psc::format {

// Length of the well-formed UTF-8 sequence at s[0..n) (1 to 4), or 0 where
// none begins: a stray continuation byte, an overlong form, a surrogate,
// beyond U+10FFFF, or cut short.
constexpr size_t utf8_sequence(const unsigned char* s, size_t n) {
  const unsigned char c = s[0];
  if (c < 0x80) return 1;
  size_t length = 0;
  unsigned char low = 0x80, high = 0xbf;  // the range of the second byte
  if (c >= 0xc2 && c <= 0xdf) {
    length = 2;
  } else if (c >= 0xe0 && c <= 0xef) {
    length = 3;
    if (c == 0xe0) low = 0xa0;   // overlong
    if (c == 0xed) high = 0x9f;  // surrogates
  } else if (c >= 0xf0 && c <= 0xf4) {
    length = 4;
    if (c == 0xf0) low = 0x90;   // overlong
    if (c == 0xf4) high = 0x8f;  // beyond U+10FFFF
  } else {
    return 0;
  }
  if (n < length || s[1] < low || s[1] > high) return 0;
  for (size_t i = 2; i < length; ++i)
    if (s[i] < 0x80 || s[i] > 0xbf) return 0;
  return length;
}

constexpr bool is_utf8(const char* s, size_t n) {
  const auto* u = reinterpret_cast<const unsigned char*>(s);
  for (size_t i = 0; i < n;) {
    const size_t length = utf8_sequence(u + i, n - i);
    if (length == 0) return false;
    i += length;
  }
  return true;
}

// Hands put(text, length) the escaped form of s[0..n), piece by piece.
// quote: also escape ' as \' (inside $'...'; messages leave it).
template <typename Put>
void put_printable(const char* s, size_t n, Put&& put, bool quote = false) {
  const auto* u = reinterpret_cast<const unsigned char*>(s);
  const auto escape_byte = [&](unsigned char c) {
    constexpr char kHex[] = "0123456789abcdef";
    const char text[4] = {'\\', 'x', kHex[c >> 4], kHex[c & 15]};
    put(text, 4);
  };
  for (size_t i = 0; i < n;) {
    const unsigned char c = u[i];
    const size_t length = utf8_sequence(u + i, n - i);
    if (c == '\n') {
      put("\\n", 2);
    } else if (c == '\t') {
      put("\\t", 2);
    } else if (c == '\r') {
      put("\\r", 2);
    } else if (c == '\\') {
      put("\\\\", 2);
    } else if (c == '\'' && quote) {
      put("\\'", 2);
    } else if (length == 0 || c < 0x20 || c == 0x7f || (c == 0xc2 && u[i + 1] < 0xa0)) {
      // Not UTF-8, or a control: every byte of it escaped.
      const size_t bytes = length == 0 ? 1 : length;
      for (size_t b = 0; b < bytes; ++b) escape_byte(u[i + b]);
      i += bytes;
      continue;
    } else {
      put(s + i, length);
      i += length;
      continue;
    }
    ++i;
  }
}

// Whether put_printable changes anything in s[0..n).
constexpr bool needs_escaping(const char* s, size_t n, bool quote = false) {
  const auto* u = reinterpret_cast<const unsigned char*>(s);
  for (size_t i = 0; i < n;) {
    const unsigned char c = u[i];
    const size_t length = utf8_sequence(u + i, n - i);
    if (length == 0 || c < 0x20 || c == 0x7f || c == '\\' || (c == '\'' && quote) || (c == 0xc2 && u[i + 1] < 0xa0))
      return true;
    i += length;
  }
  return false;
}

}  // namespace psc::format
