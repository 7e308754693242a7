#include "analysis/timeline.h"

#include <algorithm>

namespace psc {

TimelineBuilder::TimelineBuilder(uint64_t first_time_ns, uint64_t last_time_ns, size_t points)
    : first_(first_time_ns), span_(last_time_ns > first_time_ns ? last_time_ns - first_time_ns : 0), buckets_(points) {}

void TimelineBuilder::record(uint64_t time_ns, uint64_t live_bytes) {
  if (buckets_.empty()) return;
  const uint64_t offset = time_ns > first_ ? std::min(time_ns - first_, span_) : 0;
  if (offset >= current_end_) advance(offset);
  Bucket& b = buckets_[current_];
  if (!b.used) b.point.max_bytes = live_bytes;
  b.used = true;
  b.point.time_ns = std::max(time_ns, b.point.time_ns);
  b.point.live_bytes = live_bytes;
  b.point.max_bytes = std::max(b.point.max_bytes, live_bytes);
}

void TimelineBuilder::advance(uint64_t offset) {
  const size_t n = buckets_.size();
  size_t index = n - 1;
  if (span_ > 0) {
    // offset * n / (span + 1) without overflow for spans up to hours in ns.
    const unsigned __int128 scaled = static_cast<unsigned __int128>(offset) * n / (span_ + 1);
    index = static_cast<size_t>(scaled);
  }
  current_ = std::max(index, current_);
  if (current_ + 1 >= n) {
    current_end_ = UINT64_MAX;
    return;
  }
  // The first offset of the next bucket: ceil((current + 1) * (span + 1) / n).
  const unsigned __int128 next = static_cast<unsigned __int128>(current_ + 1) * (span_ + 1);
  current_end_ = static_cast<uint64_t>((next + n - 1) / n);
}

std::vector<TimelinePoint> TimelineBuilder::finish() const {
  std::vector<TimelinePoint> points;
  for (const Bucket& b : buckets_)
    if (b.used) points.push_back(b.point);
  return points;
}

}  // namespace psc
