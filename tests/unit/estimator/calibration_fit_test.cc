// The calibration's line fit: the upper envelope of the calibration waves.
#include <gtest/gtest.h>

#include "estimator/calibration.h"

namespace psc {
namespace {

TEST(CalibrationFit, ExactLine) {
  const GrowthTerm t = fit_linear({10, 20, 40}, {1100, 2100, 4100});
  EXPECT_NEAR(t.per_token, 100, 1e-9);
  EXPECT_NEAR(t.intercept, 100, 1e-6);
  EXPECT_EQ(t.margin_bytes, 0u);
  EXPECT_EQ(t.bytes_at(30), 3100u);
}

// A small wave below the line the larger ones define (the workspace of the
// embedded workload): the envelope follows the larger ones, and covers every
// point, where least squares would tilt toward the small one and fall below
// a wave between the points.
TEST(CalibrationFit, EnvelopeCoversEveryPointWithLeastExcess) {
  const std::vector<int64_t> tokens{32, 128, 384, 32};
  const std::vector<uint64_t> bytes{172032, 737280, 2211840, 172032};
  const GrowthTerm t = fit_linear(tokens, bytes);
  EXPECT_NEAR(t.per_token, 5760, 1e-6);
  EXPECT_NEAR(t.intercept, 0, 1e-3);
  for (size_t i = 0; i < tokens.size(); ++i) EXPECT_GE(t.bytes_at(tokens[i]), bytes[i]);
  EXPECT_EQ(t.bytes_at(96), 552960u);
  EXPECT_NEAR(t.max_abs_residual, 12288, 1e-3);
}

TEST(CalibrationFit, OneTokenCountIsFlatAtItsLargest) {
  const GrowthTerm t = fit_linear({64, 64}, {500, 700});
  EXPECT_EQ(t.per_token, 0);
  EXPECT_EQ(t.bytes_at(1000), 700u);
  EXPECT_EQ(fit_linear({}, {}).bytes_at(10), 0u);
}

// Concave points: the hull's edges; every point covered.
TEST(CalibrationFit, ConcavePointsAreCovered) {
  const std::vector<int64_t> tokens{10, 20, 30};
  const std::vector<uint64_t> bytes{100, 300, 350};
  const GrowthTerm t = fit_linear(tokens, bytes);
  for (size_t i = 0; i < tokens.size(); ++i) EXPECT_GE(t.bytes_at(tokens[i]), bytes[i]) << tokens[i];
}

}  // namespace
}  // namespace psc
