#include "exchange/nsys/nsys_nvtx.h"

#include <cmath>

#include <fmt/format.h>

#include "exchange/nsys/nsys_schema.h"

namespace psc::nsys {
namespace {

std::string text_of(const sqlite::Statement& s, int text, int text_id,
                    const std::unordered_map<int64_t, std::string>& strings) {
  if (!s.is_null(text)) return s.text(text);
  if (!s.is_null(text_id)) {
    auto it = strings.find(s.integer(text_id));
    if (it != strings.end()) return it->second;
  }
  return "";
}

// `<name> {<json>}` -> name, payload (interpose/nvtx_names.cc, mark_text).
void split_mark_message(std::string* text, std::string* payload) {
  const size_t brace = text->find(" {");
  if (brace == std::string::npos || brace == 0 || text->back() != '}') return;
  *payload = text->substr(brace + 1);
  text->resize(brace);
}

// A mark's numeric payload (Nsight's uint64Value, int64Value, uint32Value,
// int32Value, doubleValue, floatValue columns from `first`) as the recorder
// writes it: doubles with up to six decimals; "" when there is none.
std::string numeric_payload(const sqlite::Statement& s, int first) {
  for (int c = first; c < first + 4; ++c)
    if (!s.is_null(c)) return fmt::format("{{\"payload\": {}}}", s.text(c));
  for (int c = first + 4; c < first + 6; ++c) {
    if (s.is_null(c)) continue;
    const double v = s.real(c);
    if (!std::isfinite(v)) return "{\"payload\": null}";
    std::string digits = fmt::format("{:.6f}", v);
    while (digits.back() == '0') digits.pop_back();
    if (digits.back() == '.') digits.pop_back();
    return fmt::format("{{\"payload\": {}}}", digits);
  }
  return "";
}

}  // namespace

std::unordered_map<int64_t, std::string> read_string_ids(sqlite::Db& db) {
  std::unordered_map<int64_t, std::string> strings;
  if (!db.has_table("StringIds")) return strings;
  sqlite::Statement s(db, "SELECT id, value FROM StringIds");
  while (s.next()) strings[s.integer(0)] = s.text(1);
  return strings;
}

void read_nvtx_rows(sqlite::Db& db, uint32_t pid, const std::unordered_map<int64_t, std::string>& strings,
                    const std::function<void(const NvtxRow&)>& each) {
  if (!db.has_table("NVTX_EVENTS")) return;
  for (const char* column : {"start", "end", "eventType", "globalTid"})
    if (!db.has_column("NVTX_EVENTS", column))
      throw InputError(db.path(), std::string("NVTX_EVENTS has no column ") + column);
  auto optional = [&](const char* column) { return db.has_column("NVTX_EVENTS", column) ? column : "NULL"; };
  // Domain names: the NvtxDomainCreate rows (text, domainId) of the process.
  std::unordered_map<int64_t, std::string> domains;
  if (db.has_column("NVTX_EVENTS", "domainId")) {
    sqlite::Statement s(db, fmt::format("SELECT domainId, {}, {} FROM NVTX_EVENTS WHERE eventType = {} AND globalTid "
                                        ">> 24 & 16777215 = ? AND domainId IS NOT NULL",
                                        optional("text"), optional("textId"), kNvtxDomainCreate));
    s.bind(1, int64_t{pid});
    while (s.next()) {
      const std::string name = text_of(s, 1, 2, strings);
      if (!name.empty() && s.integer(0) != 0) domains[s.integer(0)] = name;
    }
  }
  sqlite::Statement s(
      db, fmt::format("SELECT rowid, start, end, eventType, {}, {}, {}, globalTid, {}, {}, {}, {}, {}, {}, {}, {}, {}, "
                      "{} FROM NVTX_EVENTS WHERE eventType IN ({}, {}, {}, {}, {}) AND globalTid >> 24 & 16777215 = ? "
                      "ORDER BY rowid",
                      optional("rangeId"), optional("text"), optional("textId"), optional("endGlobalTid"),
                      optional("jsonText"), optional("jsonTextId"), optional("domainId"), optional("uint64Value"),
                      optional("int64Value"), optional("uint32Value"), optional("int32Value"), optional("doubleValue"),
                      optional("floatValue"), kNvtxMark, kNvtxPushPopRange, kNvtxStartEndRange, kNvtxtPushPopRange,
                      kNvtxtStartEndRange));
  s.bind(1, int64_t{pid});
  NvtxRow r;
  while (s.next()) {
    r.row = static_cast<uint64_t>(s.integer(0));
    r.start = s.integer(1);
    r.end = s.is_null(2) ? std::nullopt : std::optional<int64_t>(s.integer(2));
    r.type = static_cast<int>(s.integer(3));
    r.range_id = s.is_null(4) ? std::nullopt : std::optional<int64_t>(s.integer(4));
    r.thread = s.integer(7);
    r.end_thread = s.is_null(8) ? std::nullopt : std::optional<int64_t>(s.integer(8));
    std::string text = text_of(s, 5, 6, strings);
    r.payload = text_of(s, 9, 10, strings);
    if (r.type == kNvtxMark && r.payload.empty()) split_mark_message(&text, &r.payload);
    if (r.type == kNvtxMark && r.payload.empty()) r.payload = numeric_payload(s, 12);
    if (text.empty() && r.type != kNvtxMark) text = "(unnamed)";
    const int64_t domain = s.is_null(11) ? 0 : s.integer(11);
    if (domain != 0) {
      auto it = domains.find(domain);
      text = (it != domains.end() ? it->second : std::string("(unknown domain)")) + "::" + text;
    }
    r.name = std::move(text);
    each(r);
  }
}

}  // namespace psc::nsys
