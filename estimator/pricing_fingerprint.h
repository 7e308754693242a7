// The fingerprint of the estimator source that decides a price. Reports carry it;
// `peakscope replay` refuses a report whose fingerprint differs from this build's
// unless told to allow source drift.
//
// kEstimatorFingerprint is FNV-1a 64 over, for each file of kFingerprintSources in
// order: its path, a NUL byte, its bytes, a NUL byte. The Makefile cannot compute
// it, so it is written here by hand and tests/unit/pricing_fingerprint_test.cc
// recomputes it from the files on disk: editing any listed file without updating
// the value fails that test, which prints the value to put here.
#pragma once

#include <cstdint>
#include <string_view>

namespace psc::pricing {

inline constexpr std::string_view kFingerprintSources[] = {
    "estimator/admission.cc", "estimator/admission.h",   "estimator/plan.cc",
    "estimator/plan.h",       "estimator/price_json.cc", "estimator/price_json.h",
    "estimator/pricing.cc",   "estimator/pricing.h",     "estimator/pricing_mutation.h",
};

inline constexpr std::string_view kEstimatorFingerprint = "fnv1a64:8158692b3ba619b5";

constexpr std::uint64_t kFnvOffset = 0xcbf29ce484222325ull;

constexpr std::uint64_t fnv1a64(std::string_view bytes, std::uint64_t state = kFnvOffset) {
  for (char c : bytes) {
    state ^= static_cast<unsigned char>(c);
    state *= 0x100000001b3ull;
  }
  return state;
}

}  // namespace psc::pricing
