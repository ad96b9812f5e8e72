// Which devices a build's kernels run on (api/built_kernels.hpp): SASS per listed arch, plus the
// embedded PTX of the lowest non-'a' arch, so a GPU newer than every listed arch still runs the
// sm80 and naive paths, and a build without PTX says so before any launch.
#include <gtest/gtest.h>

#include "api/built_kernels.hpp"

namespace flashcore::detail {
namespace {

TEST(ArchSupport, EmbeddedPtxRunsOnEveryNewerDevice) {
  for (auto [major, minor] : {std::pair{8, 0}, {8, 6}, {8, 9}, {9, 0}, {10, 0}, {12, 0}}) {
    EXPECT_TRUE(arch_list_runs_on("80,90a", "80", major, minor)) << major << "." << minor;
  }
  EXPECT_FALSE(arch_list_runs_on("86,90a", "86", 8, 0));  // PTX runs only on its own cc and newer
  EXPECT_TRUE(arch_list_runs_on("86,90a", "86", 8, 9));
}

TEST(ArchSupport, WithoutPtxOnlyTheListedSassRuns) {
  EXPECT_TRUE(arch_list_runs_on("80,90a", "", 8, 6));   // sm_80 SASS runs on 8.x, x >= 0
  EXPECT_TRUE(arch_list_runs_on("80,90a", "", 9, 0));   // sm_90a
  EXPECT_FALSE(arch_list_runs_on("80,90a", "", 10, 0)); // no SASS and no PTX for sm_100
  EXPECT_FALSE(arch_list_runs_on("80,90a", "", 12, 0));
  EXPECT_FALSE(arch_list_runs_on("90a", "", 8, 0));
  EXPECT_FALSE(arch_list_runs_on("86", "", 8, 0));      // sm_86 SASS does not run on 8.0
  EXPECT_TRUE(arch_list_runs_on("86", "", 8, 9));
  EXPECT_FALSE(arch_list_runs_on("", "", 9, 0));
}

// The padding rule (built_kernels.hpp, find_covering_kernel): a call's own pair first; otherwise the
// covering pair (both head dims >= the call's) with the least Dqk + Dv, of the call's dtype, and only
// for head dims that are multiples of 8; the end marker never matches.
int fake_launch() { return 0; }
TEST(HeadDimPadding, CoveringKernelIsTheOwnPairOrTheLeastPadding) {
  using Fn = int (*)();
  const BuiltKernel<Fn> table[] = {
      {64, 64, DType::kFloat16, &fake_launch},   {128, 128, DType::kFloat16, &fake_launch},
      {96, 96, DType::kFloat16, &fake_launch},   {192, 128, DType::kFloat16, &fake_launch},
      {256, 256, DType::kFloat16, &fake_launch}, {96, 96, DType::kBFloat16, &fake_launch},
      {0, 0, DType::kFloat32, nullptr},
  };
  auto pick = [&](int dqk, int dv, DType dt = DType::kFloat16) {
    const BuiltKernel<Fn>* k = find_covering_kernel(table, dqk, dv, dt);
    return k == nullptr ? std::pair{0, 0} : std::pair{k->head_dim_qk, k->head_dim_v};
  };
  EXPECT_EQ(pick(128, 128), (std::pair{128, 128}));  // its own
  EXPECT_EQ(pick(80, 80), (std::pair{96, 96}));      // least padding, not the first in the table
  EXPECT_EQ(pick(40, 40), (std::pair{64, 64}));
  EXPECT_EQ(pick(160, 128), (std::pair{192, 128}));  // 192 + 128 < 256 + 256
  EXPECT_EQ(pick(160, 160), (std::pair{256, 256}));
  EXPECT_EQ(pick(72, 40), (std::pair{96, 96}));      // unequal head dims
  EXPECT_EQ(pick(80, 80, DType::kBFloat16), (std::pair{96, 96}));
  EXPECT_EQ(pick(100, 100), (std::pair{0, 0}));      // not a multiple of 8: no padding
  EXPECT_EQ(pick(264, 264), (std::pair{0, 0}));      // nothing covers it
  EXPECT_EQ(pick(64, 64, DType::kFloat32), (std::pair{0, 0}));  // the end marker is no kernel
  EXPECT_TRUE(covers(100, 100, 100, 100));           // an own pair needs no multiple of 8
  EXPECT_FALSE(covers(128, 64, 96, 96));
}

}  // namespace
}  // namespace flashcore::detail
