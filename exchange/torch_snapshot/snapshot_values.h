// The torch-snapshot importer's reading of a parsed pickle: typed fields of
// the snapshot's dicts, each wrong type or missing field an InputError that
// names the file and where in the snapshot it is; and the values it keeps
// as JSON (mark payloads), frames left out (a trace has no stacks).
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "exchange/torch_snapshot/pickle_reader.h"

namespace psc {

class SnapshotValues {
 public:
  SnapshotValues(const std::string& path, const pickle::Document& doc) : path_(path), doc_(doc) {}

  const pickle::Document& doc() const { return doc_; }
  const pickle::Value& at(pickle::Ref r) const { return doc_.at(r); }
  const pickle::Value* find(const pickle::Value& dict, std::string_view key) const { return doc_.find(dict, key); }

  [[noreturn]] void fail(const std::string& reason) const;
  void expect(const pickle::Value& v, pickle::Type type, const std::string& where) const;
  int64_t integer(const pickle::Value& entry, const char* key, const std::string& where, bool required,
                  int64_t fallback = 0) const;
  uint64_t unsigned_integer(const pickle::Value& entry, const char* key, const std::string& where, bool required,
                            uint64_t fallback = 0) const;
  std::string text(const pickle::Value& entry, const char* key, const std::string& where) const;

  // A value as JSON text.
  std::string json(const pickle::Value& v);
  // The entry's scalar fields other than these, as a JSON object: a mark's payload.
  std::string other_fields(const pickle::Value& entry, std::initializer_list<std::string_view> skip);
  // Values left out of the JSON: bytes, structure nested too deep, and
  // (in other_fields) structure.
  uint64_t dropped() const { return dropped_; }

 private:
  // Nesting kept in a mark's payload (allocator_settings, a segment's
  // blocks); the memo can make a value contain itself.
  static constexpr int kMaxNesting = 16;
  nlohmann::ordered_json to_json(const pickle::Value& v, int depth);

  const std::string& path_;
  const pickle::Document& doc_;
  uint64_t dropped_ = 0;
};

}  // namespace psc
