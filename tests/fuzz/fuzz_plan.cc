// libFuzzer target: what `peakscope price PLAN.json [--budget B]` reads. Any
// file must be a JsonFileError (not a regular file, not JSON, nested too
// deep) or a PlanError naming the field, never a crash, a hang or another
// exception.
#include <cstddef>
#include <cstdint>

#include "common/json_file.h"
#include "pricing/plan.h"
#include "pricing/price_json.h"
#include "pricing/saved_price.h"
#include "tests/fuzz/fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  psc::fuzz::MemFile file(data, size);
  if (!file.ok()) return 0;
  nlohmann::ordered_json plan;
  try {
    plan = psc::read_json_file(file.path());
  } catch (const psc::JsonFileError&) {
    return 0;
  }
  // Without a budget: the price; with one: the admission search, as the CLI does.
  for (const std::optional<psc::pricing::Bytes> budget :
       {std::optional<psc::pricing::Bytes>(), std::optional<psc::pricing::Bytes>(uint64_t{80} << 30)}) {
    try {
      const psc::pricing::Json result = psc::pricing::evaluate_plan(plan, budget);
      (void)psc::pricing::make_saved_price(plan, budget, result).dump();
    } catch (const psc::pricing::PlanError&) {
    }
  }
  return 0;
}
