// JSON files the reading half takes from users (plans, calibrations, saved
// reports) and writes for them: one loader, so every command names the file
// and the reason the same way.
#pragma once

#include <stdexcept>
#include <string>

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

// Reads and parses a regular file; object keys keep the file's order.
nlohmann::ordered_json read_json_file(const std::string& path);

// Writes `json` indented by two, with a final newline.
void write_json_file(const std::string& path, const nlohmann::ordered_json& json);

}  // namespace psc
