// The sm90 scheduler's head-group size (src/attention/head_groups.hpp): one head for equal tiles; the L2
// budget and the two-wave rule for causal / windowed launches; the clamps.
#include <gtest/gtest.h>

#include "attention/head_groups.hpp"

namespace {

using flashcore::attn::heads_per_group;
constexpr double kMiB = 1024.0 * 1024.0;
constexpr double kBudget = 24 * kMiB;

double kv_bytes(int seqlen_k, int dqk, int dv) { return double(seqlen_k) * (dqk + dv) * 2; }

TEST(Sm90HeadGroups, EqualTilesGoHeadAfterHead) {
  // Dense calls take one head per group whatever the L2 budget would allow (d128 S=16k: 3 heads;
  // d64 S=8k: 12; d128 S=1k: 48).
  EXPECT_EQ(heads_per_group(kv_bytes(16384, 128, 128), kBudget, 128, 132, 128, false), 1);
  EXPECT_EQ(heads_per_group(kv_bytes(8192, 64, 64), kBudget, 43, 132, 64, false), 1);
  EXPECT_EQ(heads_per_group(kv_bytes(1024, 128, 128), kBudget, 8, 132, 512, false), 1);
}

TEST(Sm90HeadGroups, UnevenGroupsFollowTheL2Budget) {
  // d128 S=16k causal: 8 MiB of K/V per head -> 3 heads in 24 MiB (384 tiles, > 2 waves).
  EXPECT_EQ(heads_per_group(kv_bytes(16384, 128, 128), kBudget, 128, 132, 128, true), 3);
  // d64 S=8k causal: 2 MiB per head -> 12 heads.
  EXPECT_EQ(heads_per_group(kv_bytes(8192, 64, 64), kBudget, 43, 132, 64, true), 12);
}

TEST(Sm90HeadGroups, CausalGroupsSpanTwoWaves) {
  // d256 S=16k causal: 16 MiB per head allows one head (128 tiles, < 1 wave on 132 SMs); the
  // two-wave rule takes ceil(2 * 132 / 128) = 3.
  EXPECT_EQ(heads_per_group(kv_bytes(16384, 256, 256), kBudget, 128, 132, 8, true), 3);
  // 192/128 S=8k causal: the budget allows 4 heads (256 tiles, 1.9 waves) -> ceil(264 / 64) = 5.
  EXPECT_EQ(heads_per_group(kv_bytes(8192, 192, 128), kBudget, 64, 132, 32, true), 5);
}

TEST(Sm90HeadGroups, ClampedToTheHeadsThatExist) {
  EXPECT_EQ(heads_per_group(kv_bytes(1024, 64, 64), kBudget, 8, 132, 4, true), 4);
  EXPECT_EQ(heads_per_group(kv_bytes(16384, 256, 256), kBudget, 128, 132, 2, true), 2);
  EXPECT_EQ(heads_per_group(0.0, kBudget, 1, 1, 1, true), 1);
}

}  // namespace
