#include "common/json_file.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "common/input_file.h"

namespace psc {
namespace {

[[noreturn]] void fail(const std::string& path, const std::string& why) {
  throw JsonFileError(fmt::format("{}: {}", path, why));
}

}  // namespace

bool json_nested_deeper_than(std::string_view text, size_t max_depth) {
  size_t depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\')
        ++i;
      else if (c == '"')
        in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > max_depth) return true;
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return false;
}

nlohmann::json parse_json_payload(std::string_view text) {
  if (json_nested_deeper_than(text, kMaxJsonDepth)) return nlohmann::json(nlohmann::json::value_t::discarded);
  return nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
}

nlohmann::json parse_json_object(std::string_view text) {
  nlohmann::json j = parse_json_payload(text);
  return j.is_object() ? j : nlohmann::json::object();
}

std::string json_string_field(const nlohmann::json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return {};
  return it->is_string() ? it->get<std::string>() : it->dump();
}

uint64_t json_unsigned_field(const nlohmann::json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end()) return 0;
  if (it->is_number_unsigned()) return it->get<uint64_t>();
  if (it->is_number_integer()) return static_cast<uint64_t>(std::max<int64_t>(0, it->get<int64_t>()));
  return 0;
}

nlohmann::ordered_json read_json_file(const std::string& path) {
  std::string text;
  std::string error;
  if (!read_input_file(path, kMaxJsonFileBytes, "JSON file", &text, &error)) fail(path, error);
  if (json_nested_deeper_than(text, kMaxJsonDepth))
    fail(path, fmt::format("not valid JSON: nested deeper than {} levels", kMaxJsonDepth));
  // A key given twice in one object would keep only its last value, silently
  // (a plan's safety factor, a report's figure): refused, naming the key.
  std::vector<std::vector<std::string>> keys;  // per open object, its keys so far
  std::string twice;
  const auto check = [&](int, nlohmann::ordered_json::parse_event_t event, nlohmann::ordered_json& parsed) {
    using Event = nlohmann::ordered_json::parse_event_t;
    if (event == Event::object_start) keys.emplace_back();
    if (event == Event::object_end && !keys.empty()) keys.pop_back();
    if (event == Event::key && !keys.empty() && twice.empty()) {
      const std::string& key = parsed.get_ref<const std::string&>();
      if (std::find(keys.back().begin(), keys.back().end(), key) != keys.back().end()) twice = key;
      keys.back().push_back(key);
    }
    return true;
  };
  try {
    nlohmann::ordered_json json = nlohmann::ordered_json::parse(text, check);
    if (!twice.empty())
      fail(path, fmt::format("the key \"{}\" is given twice in one object (which one was meant?)", twice));
    return json;
  } catch (const nlohmann::json::exception& e) {
    // parse_error, and out_of_range for a number too large for a double (1e400).
    fail(path, fmt::format("not valid JSON: {}", e.what()));
  }
}

void write_json_file(const std::string& path, const nlohmann::ordered_json& json) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << json.dump(2) << '\n';
  out.flush();
  if (!out) fail(path, fmt::format("cannot write: {}", std::strerror(errno)));
}

}  // namespace psc
