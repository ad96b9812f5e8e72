// The sm90 scheduler's head-group size (src/sm90/head_groups.hpp): L2 budget, the two-wave rule for
// causal / windowed launches, and the clamps.
#include <gtest/gtest.h>

#include "sm90/head_groups.hpp"

namespace {

using flashcore::sm90::heads_per_group;
constexpr double kMiB = 1024.0 * 1024.0;
constexpr double kBudget = 24 * kMiB;

double kv_bytes(int seqlen_k, int dqk, int dv) { return double(seqlen_k) * (dqk + dv) * 2; }

TEST(Sm90HeadGroups, DenseGroupsFollowTheL2Budget) {
  // d128 S=16k: 8 MiB of K/V per head -> 3 heads in 24 MiB.
  EXPECT_EQ(heads_per_group(kv_bytes(16384, 128, 128), kBudget, 128, 132, 128, false), 3);
  // d64 S=8k: 2 MiB per head -> 12 heads.
  EXPECT_EQ(heads_per_group(kv_bytes(8192, 64, 64), kBudget, 43, 132, 64, false), 12);
  // More K/V per head than the budget: still one head.
  EXPECT_EQ(heads_per_group(kv_bytes(16384, 256, 256), kBudget, 128, 132, 8, false), 1);
}

TEST(Sm90HeadGroups, CausalGroupsSpanTwoWaves) {
  // d256 S=16k causal: 16 MiB per head allows one head (128 tiles, < 1 wave on 132 SMs); the
  // two-wave rule takes ceil(2 * 132 / 128) = 3.
  EXPECT_EQ(heads_per_group(kv_bytes(16384, 256, 256), kBudget, 128, 132, 8, true), 3);
  // 192/128 S=8k causal: the budget allows 4 heads (256 tiles, 1.9 waves) -> ceil(264 / 64) = 5.
  EXPECT_EQ(heads_per_group(kv_bytes(8192, 192, 128), kBudget, 64, 132, 32, true), 5);
  // Already more than two waves by the budget: the budget decides.
  EXPECT_EQ(heads_per_group(kv_bytes(16384, 128, 128), kBudget, 128, 132, 128, true), 3);
}

TEST(Sm90HeadGroups, ClampedToTheHeadsThatExist) {
  EXPECT_EQ(heads_per_group(kv_bytes(1024, 64, 64), kBudget, 8, 132, 4, false), 4);
  EXPECT_EQ(heads_per_group(kv_bytes(16384, 256, 256), kBudget, 128, 132, 2, true), 2);
  EXPECT_EQ(heads_per_group(0.0, kBudget, 1, 1, 1, true), 1);
}

}  // namespace
