// libFuzzer target: a saved price report, as `peakscope replay REPORT.json`
// reads it (pricing::replay_saved_price). Any file must be a JsonFileError or a
// PlanError naming the field, never a crash, a hang or another exception.
#include <cstddef>
#include <cstdint>

#include "common/json_file.h"
#include "pricing/plan.h"
#include "pricing/saved_price.h"
#include "tests/fuzz/fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  psc::fuzz::MemFile file(data, size);
  if (!file.ok()) return 0;
  nlohmann::ordered_json report;
  try {
    report = psc::read_json_file(file.path());
  } catch (const psc::JsonFileError&) {
    return 0;
  }
  for (const bool allow_drift : {false, true}) {
    try {
      (void)psc::pricing::replay_saved_price(report, allow_drift);
    } catch (const psc::pricing::PlanError&) {
    }
  }
  return 0;
}
