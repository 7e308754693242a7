// The fingerprint that reports carry must be the hash of the estimator source as
// it is now: editing a listed file without updating estimator/pricing_fingerprint.h
// fails here. Runs from the repository root (as `make unit` does).
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <fstream>
#include <sstream>

#include "estimator/pricing_fingerprint.h"

namespace psc::pricing {
namespace {

TEST(PricingFingerprint, MatchesTheSourcesOnDisk) {
  std::uint64_t state = kFnvOffset;
  for (std::string_view path : kFingerprintSources) {
    std::ifstream in{std::string(path), std::ios::binary};
    ASSERT_TRUE(in) << "cannot read " << path << ": run the unit tests from the repository root";
    std::stringstream text;
    text << in.rdbuf();
    state = fnv1a64(path, state);
    state = fnv1a64(std::string_view("\0", 1), state);
    state = fnv1a64(text.str(), state);
    state = fnv1a64(std::string_view("\0", 1), state);
  }
  const std::string now = fmt::format("fnv1a64:{:016x}", state);
  EXPECT_EQ(std::string(kEstimatorFingerprint), now)
      << "estimator sources changed: set kEstimatorFingerprint in estimator/pricing_fingerprint.h to \"" << now << "\"";
}

TEST(PricingFingerprint, HashIsFnv1a64) {
  // Published FNV-1a 64 test vectors.
  EXPECT_EQ(fnv1a64(""), 0xcbf29ce484222325ull);
  EXPECT_EQ(fnv1a64("a"), 0xaf63dc4c8601ec8cull);
  EXPECT_EQ(fnv1a64("foobar"), 0x85944171f73967e8ull);
}

}  // namespace
}  // namespace psc::pricing
