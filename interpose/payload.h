// A JSON object built in a fixed buffer on the caller's stack, for mark
// payloads made inside the preloaded library (no heap, no stdio). Text that
// does not fit is cut at a character boundary and the object still closes;
// `truncated()` says so.
#pragma once

#include <cstddef>
#include <cstdint>

#include "runtime/sys.h"

namespace psc::interpose {

template <size_t N>
class JsonPayload {
 public:
  JsonPayload() { buffer_[used_++] = '{'; }

  JsonPayload& number(const char* key, uint64_t value) {
    char digits[24];
    sys::format_uint(digits, value);
    return raw_field(key, digits);
  }
  JsonPayload& signed_number(const char* key, int64_t value) {
    char digits[25];
    if (value < 0) {
      digits[0] = '-';
      sys::format_uint(digits + 1, static_cast<uint64_t>(-(value + 1)) + 1);
    } else {
      sys::format_uint(digits, static_cast<uint64_t>(value));
    }
    return raw_field(key, digits);
  }
  JsonPayload& boolean(const char* key, bool value) { return raw_field(key, value ? "true" : "false"); }
  // A string value, escaped; nullptr is written as null. A value cut short
  // keeps its closing quote.
  JsonPayload& text(const char* key, const char* value) {
    if (!value) return raw_field(key, "null");
    if (!begin_field(key, 2)) return *this;
    buffer_[used_++] = '"';
    escape(value);
    buffer_[used_++] = '"';
    return *this;
  }

  // The finished object. Room for the closing brace is always kept.
  const char* str() {
    buffer_[used_] = '}';
    buffer_[used_ + 1] = 0;
    return buffer_;
  }
  bool truncated() const { return truncated_; }

 private:
  static size_t length(const char* s) {
    size_t n = 0;
    while (s[n]) ++n;
    return n;
  }
  // Writes `,"key":` when it and `value_bytes` more fit with "}\0" after
  // them; otherwise writes nothing and the field is left out. Keys are plain
  // identifiers: no escaping.
  bool begin_field(const char* key, size_t value_bytes) {
    const size_t need = (fields_ ? 1 : 0) + length(key) + 3 + value_bytes;
    if (used_ + need + 2 > N) {
      truncated_ = true;
      return false;
    }
    if (fields_++) buffer_[used_++] = ',';
    buffer_[used_++] = '"';
    for (const char* k = key; *k; ++k) buffer_[used_++] = *k;
    buffer_[used_++] = '"';
    buffer_[used_++] = ':';
    return true;
  }
  JsonPayload& raw_field(const char* key, const char* value) {
    if (!begin_field(key, length(value))) return *this;
    for (const char* s = value; *s; ++s) buffer_[used_++] = *s;
    return *this;
  }
  // Quotes, backslashes and control characters escaped; other bytes (UTF-8)
  // copied. A cut never splits an escape sequence or a UTF-8 character.
  void escape(const char* s) {
    for (; *s; ++s) {
      const unsigned char c = static_cast<unsigned char>(*s);
      char seq[7] = {};
      size_t n = 0;
      if (c == '"' || c == '\\') {
        seq[n++] = '\\';
        seq[n++] = static_cast<char>(c);
      } else if (c < 0x20) {
        const char hex[] = "0123456789abcdef";
        seq[n++] = '\\';
        seq[n++] = 'u';
        seq[n++] = '0';
        seq[n++] = '0';
        seq[n++] = hex[c >> 4];
        seq[n++] = hex[c & 15];
      } else {
        // A whole UTF-8 character at a time.
        size_t len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 1;
        for (size_t i = 0; i < len; ++i) {
          if (i > 0 && (static_cast<unsigned char>(s[i]) >> 6) != 2) {
            len = i;  // malformed: copy what is there
            break;
          }
          seq[n++] = s[i];
        }
        s += len - 1;
      }
      if (used_ + n + 3 > N) {  // the closing quote and "}\0" still fit
        truncated_ = true;
        return;
      }
      for (size_t i = 0; i < n; ++i) buffer_[used_++] = seq[i];
    }
  }

  char buffer_[N];
  size_t used_ = 0;
  int fields_ = 0;
  bool truncated_ = false;
};

}  // namespace psc::interpose
