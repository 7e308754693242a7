// The NVTX events of one process in an `nsys export --type sqlite` file
// (NVTX_EVENTS), named as peakscope's recorder names the same NVTX calls
// (docs/nvtx.md): `<domain>::<message>` outside the default domain, a mark
// `<name> {<json>}` split into name and payload, a numeric payload as
// {"payload": N}, a range without text `(unnamed)`. The nsys-sqlite importer
// and the NVTXT export's alignment (--nvtxt-align) both read them so.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <unordered_map>

#include "exchange/nsys/sqlite_db.h"

namespace psc::nsys {

struct NvtxRow {
  uint64_t row = 0;
  int type = 0;                // kNvtxMark, k(Nvtx|Nvtxt)PushPopRange, k(Nvtx|Nvtxt)StartEndRange
  int64_t start = 0;           // as the file holds it: ns from the session start
  std::optional<int64_t> end;  // none: the range never ended
  std::optional<int64_t> range_id;
  int64_t thread = 0;  // globalTid
  std::optional<int64_t> end_thread;
  std::string name, payload;  // payload "" when none
};

// StringIds (id -> text); empty when the file has no such table.
std::unordered_map<int64_t, std::string> read_string_ids(sqlite::Db& db);

// Calls `each` for every mark and range of process `pid`, in row order.
// Throws InputError (naming db.path()) when NVTX_EVENTS lacks a column it needs.
void read_nvtx_rows(sqlite::Db& db, uint32_t pid, const std::unordered_map<int64_t, std::string>& strings,
                    const std::function<void(const NvtxRow&)>& each);

}  // namespace psc::nsys
