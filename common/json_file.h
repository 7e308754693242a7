// JSON files the reading half takes from users (plans, calibrations, saved
// reports) and writes for them: one loader, so every command names the file
// and the reason the same way.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace psc {

// "PATH: cannot read: <errno text>", "PATH: not valid JSON: <where>", ...:
// the message always starts with the path.
class JsonFileError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The largest JSON file read: calibrations and plans are kilobytes; a device
// or a mistaken multi-gigabyte file must not be read until memory runs out.
constexpr size_t kMaxJsonFileBytes = size_t{256} << 20;

// nlohmann's parser recurses once per level of nesting: text nested deeper
// than this is refused before it is parsed, so no input can overflow the
// stack. Plans, calibrations, reports and wave payloads nest a few levels.
constexpr size_t kMaxJsonDepth = 64;

// True when `text` has more than max_depth arrays and objects open at once
// (brackets inside strings do not count). One pass, no allocation.
bool json_nested_deeper_than(std::string_view text, size_t max_depth);

// Parses a payload recorded in a trace (a wave's, a mark's): a discarded
// value when it is not JSON or nests deeper than kMaxJsonDepth.
nlohmann::json parse_json_payload(std::string_view text);

// The same, as an object: an empty one when the payload is not a JSON object.
nlohmann::json parse_json_object(std::string_view text);
// A payload's field as text ("" when absent or null; a non-string as its
// JSON), and as a count (0 when absent, negative or not an integer).
std::string json_string_field(const nlohmann::json& j, const char* key);
uint64_t json_unsigned_field(const nlohmann::json& j, const char* key);

// Reads and parses a regular file (no FIFO, device or directory); object keys keep the file's order.
nlohmann::ordered_json read_json_file(const std::string& path);

// Writes `json` indented by two, with a final newline.
void write_json_file(const std::string& path, const nlohmann::ordered_json& json);

}  // namespace psc
