// How a calibrated term grows with the wave (estimator/growth.h): the growth
// chosen from the data, the envelope, and the conservative growth outside the
// calibrated sizes.
#include <gtest/gtest.h>

#include "estimator/growth.h"

namespace psc {
namespace {

std::vector<GrowthPoint> points(const std::vector<int64_t>& tokens, double a, double b, double c) {
  std::vector<GrowthPoint> out;
  for (int64_t t : tokens) {
    const WaveSize size = unpacked(t);
    out.push_back({size, static_cast<uint64_t>(a + b * static_cast<double>(t) + c * size.square_tokens)});
  }
  return out;
}

TEST(Growth, LinearDataChoosesLinearAndExtrapolatesExactly) {
  const GrowthTerm t = fit_growth(points({64, 128, 256}, 1000, 300, 0));
  EXPECT_EQ(t.growth, Growth::kLinear);
  EXPECT_EQ(t.sizes, 3u);
  EXPECT_NEAR(t.left_out_error_linear, 0, 1e-12);
  // Three times beyond: the conservative (quadratic) envelope of linear data is the line itself.
  EXPECT_TRUE(t.outside(unpacked(768)));
  EXPECT_EQ(t.bytes_at(768), 1000u + 300u * 768u);
}

TEST(Growth, QuadraticDataChoosesQuadratic) {
  // Eager attention: 16 t^2 bytes of saved probabilities beside linear activations.
  const GrowthTerm t = fit_growth(points({64, 128, 256}, 4096, 1024, 16));
  EXPECT_EQ(t.growth, Growth::kQuadratic);
  EXPECT_GT(t.left_out_error_linear, 0.01);
  EXPECT_NEAR(t.per_square_token, 16, 1e-6);
  const double at = 4096 + 1024 * 768.0 + 16 * 768.0 * 768.0;
  EXPECT_NEAR(static_cast<double>(t.bytes_at(768)), at, 2);
  // A line through the same points would be far below.
  GrowthTerm line = t;
  line.per_square_token = 0;
  EXPECT_LT(line.line(768), at * 0.7);
}

TEST(Growth, FourSizesChooseByTheLeftOutErrorOfEach) {
  const GrowthTerm linear = fit_growth(points({32, 64, 128, 256}, 0, 500, 0));
  EXPECT_EQ(linear.growth, Growth::kLinear);
  const GrowthTerm quadratic = fit_growth(points({32, 64, 128, 256}, 0, 500, 4));
  EXPECT_EQ(quadratic.growth, Growth::kQuadratic);
  EXPECT_GE(quadratic.left_out_error_quadratic, 0);
  EXPECT_LT(quadratic.left_out_error_quadratic, quadratic.left_out_error_linear);
}

TEST(Growth, EveryPointCoveredEvenWhenNoisy) {
  std::vector<GrowthPoint> p = points({32, 64, 96, 128, 256}, 100, 40, 0);
  p[2].bytes += 5000;  // one size above the line
  const GrowthTerm t = fit_growth(p);
  for (const GrowthPoint& q : p) EXPECT_GE(t.bytes_at(q.size), q.bytes) << q.size.tokens;
}

TEST(Growth, FewSizesTakeTheConservativeGrowth) {
  // One size: flat below it, growing with t^2 above it.
  const GrowthTerm one = fit_growth(points({100}, 0, 10, 0));
  EXPECT_EQ(one.growth, Growth::kFlat);
  EXPECT_TRUE(one.few_sizes());
  EXPECT_EQ(one.bytes_at(50), 1000u);
  EXPECT_EQ(one.bytes_at(200), 4000u);
  // Two sizes of a quadratic term: the line between them inside, the curve through both outside.
  const GrowthTerm two = fit_growth(points({100, 200}, 0, 0, 1));
  EXPECT_EQ(two.growth, Growth::kLinear);
  EXPECT_EQ(two.bytes_at(150), 25000u);   // the chord: above the curve (22500)
  EXPECT_EQ(two.bytes_at(400), 160000u);  // the curve, where the chord says 70000
}

TEST(Growth, PackedWavesFollowTheSumOfSquares) {
  // Per-sequence attention: bytes = 8 t + 4 sum(l^2), calibrated on packed waves.
  auto point = [](std::vector<int64_t> lengths) {
    int64_t t = 0;
    for (int64_t l : lengths) t += l;
    const WaveSize size = packed(t, lengths);
    return GrowthPoint{size, static_cast<uint64_t>(8.0 * static_cast<double>(t) + 4 * size.square_tokens)};
  };
  const GrowthTerm t = fit_growth({point({64, 64}), point({96, 64, 32}), point({128, 128}), point({256})});
  const GrowthPoint inside = point({100, 60, 20});
  EXPECT_NEAR(static_cast<double>(t.bytes_at(inside.size)), static_cast<double>(inside.bytes), 2);
  // More sequences than any calibration wave: outside, warned about.
  EXPECT_TRUE(t.outside(packed(160, {40, 40, 40, 40})));
  EXPECT_FALSE(t.outside(inside.size));
}

TEST(Growth, LongestSequenceBeyondTheCalibratedBoundsItsSquares) {
  // Calibrated on waves whose longest sequence holds half the squares; a
  // wave whose longest sequence is longer than any calibrated one prices
  // its squares as l_max^2 / 0.5.
  auto point = [](std::vector<int64_t> lengths, double bytes_per_square) {
    int64_t t = 0;
    for (int64_t l : lengths) t += l;
    const WaveSize size = packed(t, lengths);
    return GrowthPoint{size, static_cast<uint64_t>(bytes_per_square * size.square_tokens)};
  };
  const GrowthTerm t = fit_growth({point({32, 32}, 2), point({64, 64}, 2), point({128, 128}, 2)});
  const WaveSize wave = packed(576, {512, 64});
  EXPECT_GE(static_cast<double>(t.bytes_at(wave)), 2 * 512.0 * 512.0 / 0.5 - 1);
}

}  // namespace
}  // namespace psc
