// Text escaping shared by the text exporters (Chrome JSON, HTML, NVTXT). Names
// and payloads come from the traced program: anything may be in them,
// including invalid UTF-8, which is replaced (U+FFFD) rather than copied.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace psc {

// Valid UTF-8 with every invalid sequence replaced by U+FFFD.
std::string sanitize_utf8(std::string_view s);
// A JSON string literal, quotes included.
std::string json_quote(std::string_view s);
// Text safe inside HTML elements and double-quoted attributes.
std::string html_escape(std::string_view s);
// "123.456": nanoseconds as microseconds with three decimals, exactly.
std::string micros(uint64_t ns);

}  // namespace psc
