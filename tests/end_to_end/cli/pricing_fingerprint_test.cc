// The fingerprint that reports carry must be the one of the pricing sources as
// they are now: the build regenerates it whenever a source changes, and this
// recomputes it with the same tool from the files on disk. Runs from the
// repository root (as `make unit` does). That comments and layout do not
// change it is tests/cli/test_fingerprint.sh.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "pricing/pricing_fingerprint.h"

namespace psc::pricing {
namespace {

TEST(PricingFingerprint, MatchesTheSourcesOnDisk) {
  const std::string command = "tools/pricing-fingerprint " + std::string(kFingerprintSources);
  FILE* pipe = ::popen(command.c_str(), "r");
  ASSERT_NE(pipe, nullptr) << command;
  char line[128] = {};
  const bool read = std::fgets(line, sizeof line, pipe) != nullptr;
  const int status = ::pclose(pipe);
  ASSERT_TRUE(read && status == 0) << command << ": run the unit tests from the repository root";
  std::string now(line);
  if (!now.empty() && now.back() == '\n') now.pop_back();
  EXPECT_EQ(std::string(kEstimatorFingerprint), now) << "the build's fingerprint is stale: run make";
}

TEST(PricingFingerprint, CoversThePricingModel) {
  const std::string sources(kFingerprintSources);
  for (const char* file : {"pricing/pricing.cc", "pricing/pricing.h", "pricing/plan.cc", "pricing/admission.cc"})
    EXPECT_NE(sources.find(file), std::string::npos) << file;
  EXPECT_EQ(std::string(kEstimatorFingerprint).rfind("fnv1a64:", 0), 0u);
}

}  // namespace
}  // namespace psc::pricing
