#include "interpose/nvtx_names.h"

#include <cmath>
#include <cstddef>
#include <cstring>

#include "runtime/sys.h"

namespace psc::interpose::nvtx {
namespace {

constexpr const char* kUnnamed = "(unnamed)";
constexpr const char* kUnknownString = "(unknown string)";

// Fields of an attribute structure the caller's `size` says are present
// (version 1 and 2 share this layout; later versions only append).
bool has_message(const nvtxEventAttributes_t* a) {
  return a && a->size >= offsetof(nvtxEventAttributes_t, message) + sizeof(a->message);
}
bool has_payload(const nvtxEventAttributes_t* a) {
  return a && a->size >= offsetof(nvtxEventAttributes_t, payload) + sizeof(a->payload);
}

const char* join(const char* prefix, const char* text, size_t text_length, NameBuffer& out) {
  const size_t prefix_length = strnlen(prefix, kMaxName - 1);
  if (text_length > kMaxName - 1 - prefix_length) text_length = kMaxName - 1 - prefix_length;
  memcpy(out.text, prefix, prefix_length);
  memcpy(out.text + prefix_length, text, text_length);
  out.text[prefix_length + text_length] = 0;
  return out.text;
}

// Returns the UTF-8 bytes of `c` in `bytes`, their count as the result.
int utf8_encode(uint32_t c, char bytes[4]) {
  if (c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF)) c = 0xFFFD;  // not a character
  if (c < 0x80) {
    bytes[0] = static_cast<char>(c);
    return 1;
  }
  if (c < 0x800) {
    bytes[0] = static_cast<char>(0xC0 | (c >> 6));
    bytes[1] = static_cast<char>(0x80 | (c & 0x3F));
    return 2;
  }
  if (c < 0x10000) {
    bytes[0] = static_cast<char>(0xE0 | (c >> 12));
    bytes[1] = static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    bytes[2] = static_cast<char>(0x80 | (c & 0x3F));
    return 3;
  }
  bytes[0] = static_cast<char>(0xF0 | (c >> 18));
  bytes[1] = static_cast<char>(0x80 | ((c >> 12) & 0x3F));
  bytes[2] = static_cast<char>(0x80 | ((c >> 6) & 0x3F));
  bytes[3] = static_cast<char>(0x80 | (c & 0x3F));
  return 4;
}

// Decimal text of a double without stdio: up to 6 decimals (none from 1e12
// on), trailing zeros dropped; "null" for values JSON cannot carry.
void format_double(double value, char* out) {
  if (!std::isfinite(value) || std::fabs(value) >= 9e18) {
    memcpy(out, "null", 5);
    return;
  }
  if (value < 0) {
    *out++ = '-';
    value = -value;
  }
  if (value >= 1e12) {  // six decimals would overflow the scaled integer
    sys::format_uint(out, static_cast<uint64_t>(value + 0.5));
    return;
  }
  uint64_t scaled = static_cast<uint64_t>(value * 1e6 + 0.5);  // value >= 0 here; no libm in the preload
  out = sys::format_uint(out, scaled / 1000000);
  uint64_t fraction = scaled % 1000000;
  if (fraction == 0) return;
  *out++ = '.';
  char digits[7];
  for (int i = 5; i >= 0; --i, fraction /= 10) digits[i] = static_cast<char>('0' + fraction % 10);
  int n = 6;
  while (digits[n - 1] == '0') --n;
  memcpy(out, digits, n);
  out[n] = 0;
}

// {"payload": <number>} for a numeric NVTX payload, or nullptr.
const char* numeric_payload(const nvtxEventAttributes_t* a, char* out) {
  if (!has_payload(a)) return nullptr;
  static constexpr char kHead[] = "{\"payload\": ";
  char* p = out;
  memcpy(p, kHead, sizeof kHead - 1);
  p += sizeof kHead - 1;
  auto signed_value = [&](int64_t v) {
    if (v < 0) *p++ = '-';
    p = sys::format_uint(p, v < 0 ? 0 - static_cast<uint64_t>(v) : static_cast<uint64_t>(v));
  };
  switch (a->payloadType) {
    case NVTX_PAYLOAD_TYPE_UNSIGNED_INT64: p = sys::format_uint(p, a->payload.ullValue); break;
    case NVTX_PAYLOAD_TYPE_INT64: signed_value(a->payload.llValue); break;
    case NVTX_PAYLOAD_TYPE_UNSIGNED_INT32: p = sys::format_uint(p, a->payload.uiValue); break;
    case NVTX_PAYLOAD_TYPE_INT32: signed_value(a->payload.iValue); break;
    case NVTX_PAYLOAD_TYPE_DOUBLE: format_double(a->payload.dValue, p); break;
    case NVTX_PAYLOAD_TYPE_FLOAT: format_double(a->payload.fValue, p); break;
    default: return nullptr;
  }
  p += strlen(p);
  *p++ = '}';
  *p = 0;
  return out;
}

}  // namespace

void wide_to_utf8(const wchar_t* wide, NameBuffer& out) {
  size_t n = 0;
  for (; wide && *wide; ++wide) {
    char bytes[4];
    const int count = utf8_encode(static_cast<uint32_t>(*wide), bytes);
    if (n + count > kMaxName - 1) break;
    memcpy(out.text + n, bytes, count);
    n += count;
  }
  out.text[n] = 0;
}

const char* ascii_name(const char* prefix, const char* message, NameBuffer& out) {
  if (!message) message = kUnnamed;
  if (!*prefix) return message;
  return join(prefix, message, strnlen(message, kMaxName - 1), out);
}

const char* wide_name(const char* prefix, const wchar_t* message, NameBuffer& out) {
  if (!message) return ascii_name(prefix, nullptr, out);
  NameBuffer converted;
  wide_to_utf8(message, converted);
  return join(prefix, converted.text, strlen(converted.text), out);
}

const char* attributes_name(const char* prefix, const nvtxEventAttributes_t* a, NameBuffer& out) {
  if (!has_message(a)) return ascii_name(prefix, nullptr, out);
  switch (a->messageType) {
    case NVTX_MESSAGE_TYPE_ASCII: return ascii_name(prefix, a->message.ascii, out);
    case NVTX_MESSAGE_TYPE_UNICODE: return wide_name(prefix, a->message.unicode, out);
    case NVTX_MESSAGE_TYPE_REGISTERED: {
      // Registered texts already carry their own domain's prefix.
      const char* text = string_lookup(a->message.registered);
      return text ? text : ascii_name(prefix, kUnknownString, out);
    }
    default: return ascii_name(prefix, nullptr, out);
  }
}

MarkText mark_text(const char* prefix, const char* message, MarkBuffers& buffers) {
  if (message) {
    const char* brace = strstr(message, " {");
    const size_t length = strlen(message);
    if (brace && brace != message && message[length - 1] == '}') {
      return {join(prefix, message, static_cast<size_t>(brace - message), buffers.name), brace + 1};
    }
  }
  return {ascii_name(prefix, message, buffers.name), nullptr};
}

MarkText mark_text(const char* prefix, const nvtxEventAttributes_t* a, MarkBuffers& buffers) {
  MarkText text{};
  if (has_message(a) && a->messageType == NVTX_MESSAGE_TYPE_ASCII) {
    text = mark_text(prefix, a->message.ascii, buffers);
  } else if (has_message(a) && a->messageType == NVTX_MESSAGE_TYPE_UNICODE && a->message.unicode) {
    wide_to_utf8(a->message.unicode, buffers.message);
    text = mark_text(prefix, buffers.message.text, buffers);
  } else {
    text = {attributes_name(prefix, a, buffers.name), nullptr};
  }
  if (!text.payload) text.payload = numeric_payload(a, buffers.payload);
  return text;
}

}  // namespace psc::interpose::nvtx
