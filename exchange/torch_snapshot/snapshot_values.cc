#include "exchange/torch_snapshot/snapshot_values.h"

#include <algorithm>

#include <fmt/format.h>

#include "exchange/export_text.h"
#include "exchange/exporter.h"

namespace psc {

using pickle::Type;
using pickle::Value;

void SnapshotValues::fail(const std::string& reason) const { throw InputError(path_, reason); }

void SnapshotValues::expect(const Value& v, Type type, const std::string& where) const {
  if (v.type != type)
    fail(fmt::format("{} is a {}, not a {}", where, pickle::type_name(v.type), pickle::type_name(type)));
}

int64_t SnapshotValues::integer(const Value& entry, const char* key, const std::string& where, bool required,
                                int64_t fallback) const {
  const Value* v = doc_.find(entry, key);
  if (!v || v->type == Type::kNone) {
    if (required) fail(fmt::format("{} has no {}", where, key));
    return fallback;
  }
  if (v->type == Type::kBool) return v->boolean;
  if (v->type != Type::kInt) fail(fmt::format("{}.{} is a {}, not an int", where, key, pickle::type_name(v->type)));
  return v->integer;
}

uint64_t SnapshotValues::unsigned_integer(const Value& entry, const char* key, const std::string& where, bool required,
                                          uint64_t fallback) const {
  const int64_t v = integer(entry, key, where, required, static_cast<int64_t>(fallback));
  if (v < 0) fail(fmt::format("{}.{} is negative ({})", where, key, v));
  return static_cast<uint64_t>(v);
}

std::string SnapshotValues::text(const Value& entry, const char* key, const std::string& where) const {
  const Value* v = doc_.find(entry, key);
  if (!v) fail(fmt::format("{} has no {}", where, key));
  if (v->type != Type::kString) fail(fmt::format("{}.{} is a {}, not a str", where, key, pickle::type_name(v->type)));
  return v->text;
}

nlohmann::ordered_json SnapshotValues::to_json(const Value& v, int depth) {
  if (depth > kMaxNesting) {
    ++dropped_;
    return nullptr;
  }
  switch (v.type) {
    case Type::kNone: return nullptr;
    case Type::kBool: return v.boolean;
    case Type::kInt: return v.integer;
    case Type::kFloat: return v.real;
    case Type::kString: return sanitize_utf8(v.text);  // pickled str may hold any bytes
    case Type::kBytes: ++dropped_; return nullptr;
    case Type::kList:
    case Type::kTuple: {
      nlohmann::ordered_json a = nlohmann::ordered_json::array();
      for (pickle::Ref r : v.items) a.push_back(to_json(doc_.at(r), depth + 1));
      return a;
    }
    case Type::kDict: {
      nlohmann::ordered_json o = nlohmann::ordered_json::object();
      for (size_t i = 0; i + 1 < v.items.size(); i += 2) {
        const Value& k = doc_.at(v.items[i]);
        if (k.type != Type::kString || k.text == "frames") continue;
        o[sanitize_utf8(k.text)] = to_json(doc_.at(v.items[i + 1]), depth + 1);
      }
      return o;
    }
  }
  return nullptr;
}

static std::string dump(const nlohmann::ordered_json& j) {
  return j.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

std::string SnapshotValues::json(const Value& v) { return dump(to_json(v, 0)); }

std::string SnapshotValues::other_fields(const Value& entry, std::initializer_list<std::string_view> skip) {
  nlohmann::ordered_json j = nlohmann::ordered_json::object();
  for (size_t i = 0; i + 1 < entry.items.size(); i += 2) {
    const Value& k = doc_.at(entry.items[i]);
    const Value& v = doc_.at(entry.items[i + 1]);
    if (k.type != Type::kString) continue;
    if (std::find(skip.begin(), skip.end(), k.text) != skip.end()) continue;
    switch (v.type) {
      case Type::kInt:
      case Type::kBool:
      case Type::kFloat:
      case Type::kString:
      case Type::kNone: j[sanitize_utf8(k.text)] = to_json(v, 0); break;
      default: ++dropped_; break;  // frames and other structure: not kept
    }
  }
  return dump(j);
}

}  // namespace psc
