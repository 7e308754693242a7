// A bounded live-bytes timeline: samples fall into a fixed number of time
// buckets over the trace's span, each keeping its maximum and last value, so a
// plot of millions of events costs a few hundred points and still shows every
// peak.
#pragma once

#include <cstdint>
#include <vector>

#include "analysis/analysis.h"

namespace psc {

class TimelineBuilder {
 public:
  // points == 0 records nothing.
  TimelineBuilder(uint64_t first_time_ns, uint64_t last_time_ns, size_t points);
  void record(uint64_t time_ns, uint64_t live_bytes);
  // Buckets that received samples, in time order.
  std::vector<TimelinePoint> finish() const;

 private:
  void advance(uint64_t offset);  // moves current_ to offset's bucket (never back)

  struct Bucket {
    bool used = false;
    TimelinePoint point;
  };
  uint64_t first_;
  uint64_t span_;
  std::vector<Bucket> buckets_;
  size_t current_ = 0;  // buckets never go backwards, even if clocks do
  // First offset past the current bucket: a sample below it lands in the
  // current bucket, so the division (128-bit) runs once per bucket, not per sample.
  uint64_t current_end_ = 0;
};

}  // namespace psc
