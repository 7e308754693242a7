// libFuzzer target: a calibration file, as `peakscope price --calibration`,
// `check` and the C ABI read it (calibration_from_json behind
// read_calibration), then a prediction from it. Any file must be a
// CalibrationError naming the file and field, or a PredictError, never a
// crash, a hang or another exception.
#include <cstddef>
#include <cstdint>

#include "estimator/calibration.h"
#include "estimator/predict.h"
#include "tests/fuzz/fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  psc::fuzz::MemFile file(data, size);
  if (!file.ok()) return 0;
  psc::Calibration calibration;
  try {
    calibration = psc::read_calibration(file.path());
    (void)psc::calibration_to_json(calibration);
  } catch (const psc::CalibrationError&) {
    return 0;
  }
  for (const bool cold : {false, true}) {
    psc::WaveRequest request;
    request.tokens = 512;
    request.cold = cold;
    try {
      (void)psc::predict(calibration, request);
    } catch (const psc::PredictError&) {
    }
  }
  return 0;
}
