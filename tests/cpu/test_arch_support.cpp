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

}  // namespace
}  // namespace flashcore::detail
