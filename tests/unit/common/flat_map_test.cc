// common/flat_map.h: the flat table agrees with std::map through a long run
// of inserts, overwrites and erases on keys that collide and wrap around the
// table's end; iteration visits every entry once.
#include "common/flat_map.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <map>

namespace psc {
namespace {

// A hash that sends every key to one of four homes near the table's end (the
// top bits set, two of them cleared by the key): long probe runs that wrap
// around slot 0, the case the backward shift must get right.
struct CrowdedHash {
  uint64_t operator()(uint64_t k) const { return ~((k % 4) << 60); }
};

template <typename Hash>
void matches_a_map(uint64_t keys, int steps) {
  FlatMap<uint64_t, uint64_t, Hash> table;
  std::map<uint64_t, uint64_t> oracle;
  uint64_t rng = 7;
  for (int i = 0; i < steps; ++i) {
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    const uint64_t key = (rng >> 20) % keys;
    const uint64_t value = rng >> 40;
    if ((rng >> 8) % 3) {
      EXPECT_EQ(*table.insert(key, value), value);
      oracle[key] = value;
    } else {
      uint64_t removed = 0;
      const bool erased = table.erase(key, &removed);
      auto it = oracle.find(key);
      ASSERT_EQ(erased, it != oracle.end()) << i;
      if (erased) {
        EXPECT_EQ(removed, it->second);
        oracle.erase(it);
      }
    }
    ASSERT_EQ(table.size(), oracle.size());
    const uint64_t probe = (rng >> 30) % keys;
    const uint64_t* found = table.find(probe);
    auto it = oracle.find(probe);
    ASSERT_EQ(found != nullptr, it != oracle.end()) << i;
    if (found) {
      EXPECT_EQ(*found, it->second);
    }
  }
  size_t seen = 0;
  table.for_each([&](uint64_t key, uint64_t value) {
    ++seen;
    auto it = oracle.find(key);
    ASSERT_NE(it, oracle.end());
    EXPECT_EQ(value, it->second);
  });
  EXPECT_EQ(seen, oracle.size());
}

TEST(FlatMap, MatchesAMapThroughGrowthAndErasure) { matches_a_map<Mix64Hash>(20000, 300000); }

TEST(FlatMap, ProbeRunsThatWrapAroundTheEndStayFindable) { matches_a_map<CrowdedHash>(40, 20000); }

}  // namespace
}  // namespace psc
