// Deliberately broken variants of the pricing model, for tools/mutation-check.
// A normal build leaves PSC_PRICING_MUTATION undefined (0): no variant is active.
// Each variant is one wrong idea the tests must catch:
//   1  drop the other groups' positive net (price only the worst single group)
//   2  count a shared parameter at its lowest layer instead of its highest
//   3  forget the outside-decoder bucket p[L]
//   4  charge split children with the same slot set once each instead of once
//   5  ignore the overlap credit (workspace_after_gradient_bytes)
//   6  price a layer's after-gradient moment without that layer's own gradient
#pragma once

#ifndef PSC_PRICING_MUTATION
#define PSC_PRICING_MUTATION 0
#endif

namespace psc::pricing {
constexpr int kMutation = PSC_PRICING_MUTATION;
constexpr int kMutationDropOtherNets = 1;
constexpr int kMutationSharedAtLowest = 2;
constexpr int kMutationForgetOutside = 3;
constexpr int kMutationSameSlotTwice = 4;
constexpr int kMutationIgnoreOverlap = 5;
constexpr int kMutationAfterWithoutOwn = 6;
}  // namespace psc::pricing
