// The JSON of `peakscope price --calibration ... --json` (and of the Python
// API's errors and warnings): price_to_json's figures plus the request, the
// extrapolation warnings and how the wave was priced.
#pragma once

#include <cstdint>

#include "estimator/predict.h"
#include "pricing/price_json.h"

namespace psc {

// price_to_json + {"request": {...}, "pricing": "worst moment" | "sum of maxima",
//                  "warnings": [...], "extrapolated": {"outside": [...], "few_sizes": [...]}}
pricing::Json prediction_to_json(const Calibration& calibration, const WaveRequest& request,
                                 const Prediction& prediction);

// {"ranks": [{"rank", "tokens", "raw_bytes", "required_bytes"}], "busiest_rank"}
pricing::Json ranks_to_json(const RunPrediction& run);

// {"budget_bytes", "max_tokens", "max_sequence_length", "admitted_tokens", "decided_by",
//  "search_prices", "next_required_bytes", "price": prediction_to_json at the width, or null}
pricing::Json wave_admission_to_json(const Calibration& calibration, const WaveRequest& shape,
                                     int64_t max_sequence_length, int64_t max_tokens, pricing::Bytes budget_bytes,
                                     const pricing::Admission& admission);

}  // namespace psc
