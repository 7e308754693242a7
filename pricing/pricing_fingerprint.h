// The fingerprint of the estimator source that decides a price. Reports carry it;
// `peakscope replay` refuses a report whose fingerprint differs from this build's
// unless told to allow source drift.
//
// The build computes it (tools/pricing-fingerprint, the sources listed in the
// Makefile's FINGERPRINT_SRCS) from the sources' C++ tokens: comments and
// layout do not change it, any change to the code does. The generated header
// is in the build folder, on the include path of every object.
#pragma once

#include <string_view>

#include "pricing/fingerprint_value.h"

namespace psc::pricing {

inline constexpr std::string_view kEstimatorFingerprint = PSC_PRICING_FINGERPRINT;
// The files it was computed from, space-separated, in order.
inline constexpr std::string_view kFingerprintSources = PSC_PRICING_FINGERPRINT_SOURCES;

}  // namespace psc::pricing
