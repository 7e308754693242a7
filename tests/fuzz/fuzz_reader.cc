// libFuzzer target: the .pstrace reader (and the analysis every consumer runs
// on what it reads). A damaged or hostile file must give a TraceError or a
// truncated/corrupt status, never a crash, a hang or an allocation without
// bound.
#include <cstddef>
#include <cstdint>

#include "analysis/analysis.h"
#include "tests/fuzz/fuzz_support.h"
#include "traces/reader.h"

namespace {

class Counting : public psc::TraceVisitor {
 public:
  void on_events(const psc::Event* events, size_t count, const psc::TraceMeta& meta) override {
    for (size_t i = 0; i < count; ++i) names += meta.string(events[i].name).size();
  }
  size_t names = 0;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  psc::fuzz::MemFile file(data, size);
  if (!file.ok()) return 0;
  try {
    Counting visitor;
    const psc::ReadStatus status = psc::read_trace(file.path(), visitor);
    if (status.events > 0) psc::analyze_trace(file.path());
  } catch (const psc::TraceError&) {
  }
  return 0;
}
