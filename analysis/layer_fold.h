// Consecutive layers that hold the same bytes fold into one row ("0-30"): a
// model's identical layers read as one line and the layer that differs (the
// one running at the peak) stands out. The report's per-layer table
// (analysis/report_text.cc) and top's live view (cli/top_render.cc) fold
// their own rows by this one rule.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace psc {

// Folds rows 0..count-1 into runs of consecutive rows: row `next` joins the
// run that began at row `first` while joins(first, next) holds (every row
// from first to next - 1 having joined). Calls emit(first, last) for each
// run in order, `last` its last row.
template <typename Joins, typename Emit>
void fold_layer_rows(size_t count, Joins joins, Emit emit) {
  for (size_t first = 0; first < count;) {
    size_t next = first + 1;
    while (next < count && joins(first, next)) ++next;
    emit(first, next - 1);
    first = next;
  }
}

// "7", or "0-30" for a row that stands for several consecutive layers.
inline std::string layer_span(int64_t first, int64_t last) {
  return first == last ? std::to_string(first) : std::to_string(first) + "-" + std::to_string(last);
}

}  // namespace psc
