// A pickle (exchange/torch_snapshot/pickle_reader.h's Document) as JSON, for tests that compare
// snapshots: references followed, depth-bounded (the memo can make cycles),
// bytes and non-string keys as placeholders.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "exchange/torch_snapshot/pickle_reader.h"
#include "tests/support/export_fixture.h"

namespace psc::test {

inline nlohmann::json pickle_to_json(const pickle::Document& doc, const pickle::Value& v, int depth = 0) {
  using pickle::Type;
  if (depth > 32) return "<deep>";
  switch (v.type) {
    case Type::kNone: return nullptr;
    case Type::kBool: return v.boolean;
    case Type::kInt: return v.integer;
    case Type::kFloat: return v.real;
    case Type::kString: return v.text;
    case Type::kBytes: return "<bytes>";
    case Type::kList:
    case Type::kTuple: {
      nlohmann::json a = nlohmann::json::array();
      for (pickle::Ref r : v.items) a.push_back(pickle_to_json(doc, doc.at(r), depth + 1));
      return a;
    }
    case Type::kDict: {
      nlohmann::json o = nlohmann::json::object();
      for (size_t i = 0; i + 1 < v.items.size(); i += 2)
        o[doc.at(v.items[i]).type == Type::kString ? doc.at(v.items[i]).text : "<key>"] =
            pickle_to_json(doc, doc.at(v.items[i + 1]), depth + 1);
      return o;
    }
  }
  return nullptr;
}

// The pickle file at `path` as JSON.
inline nlohmann::json load_pickle_json(const std::string& path) {
  const pickle::Document doc = pickle::parse(read_file(path));
  return pickle_to_json(doc, doc.at(doc.root()));
}

}  // namespace psc::test
