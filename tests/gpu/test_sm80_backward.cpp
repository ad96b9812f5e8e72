// The sm80 backward (src/sm80/bwd/) against the fp64 CPU reference backward on the same inputs
// (tests/gpu/backward_check.hpp), over features x head dims x dtypes x tails, with several KV and
// query blocks per sequence; deterministic mode bitwise repeatable; the dispatch's choice.
#include "backward_check.hpp"

namespace flashcore {
namespace {

using testing::BackwardCase;

KernelPath chosen_path(const testing::TestCase& c, KernelPath pinned = KernelPath::kAuto, Status* status = nullptr) {
  return testing::chosen_backward_path(c, pinned, status);
}

bool sm80_built(int d, DType dt) { return testing::backward_path_takes(KernelPath::kSm80, d, d, dt, "sm80-bwd"); }

TEST(Sm80Backward, MatchesTheFp64CpuReference) {
  FC_REQUIRE_GPU();
  testing::BackwardRun run;
  run.path = KernelPath::kSm80;
  run.expect_repeatable = false;  // fp32 dQ adds by atomics in any order
  run.tag = "sm80-bwd";
  for (DType dt : {DType::kFloat16, DType::kBFloat16})
    for (int d : {32, 64, 96, 128, 192, 256}) {  // 192 / 256: dK, dV in column halves
      if (!sm80_built(d, dt)) continue;
      testing::check_backward_cases(testing::backward_feature_cases(dt, d), run);
    }
}

// Head dims without a backward kernel of their own run padded on the covering one (api/built_kernels.hpp):
// 40 -> 64, 80 -> 96, 24 -> 32, 72/40 -> 96/96 (unequal), 160 -> 192, 200/136 -> 256/256 (column
// halves with a padded part); zeros past the call's columns in Q, K, V,
// dO, and dQ, dK, dV written only in its columns (a write past them would show in the padding check
// of check_backward's strided layouts and in the values here).
TEST(Sm80Backward, PaddedHeadDimsMatchTheFp64CpuReference) {
  FC_REQUIRE_GPU();
  testing::BackwardRun run;
  run.path = KernelPath::kSm80;
  run.expect_repeatable = false;
  run.tag = "sm80-bwd-padded";
  int ran = 0;
  const std::pair<int, int> dims[] = {{40, 40}, {80, 80}, {24, 24}, {72, 40}, {160, 160}, {200, 136}};
  for (DType dt : {DType::kFloat16, DType::kBFloat16})
    for (auto [dqk, dv] : dims) {
      if (!testing::backward_path_takes(KernelPath::kSm80, dqk, dv, dt, "sm80-bwd")) continue;
      ran += testing::check_backward_cases(testing::backward_feature_cases(dt, dqk, dv), run);
    }
  if (ran == 0) GTEST_SKIP() << "no covering sm80 backward kernel in this build";
}

TEST(Sm80Backward, DeterministicModeIsBitwiseRepeatable) {
  FC_REQUIRE_GPU();
  testing::BackwardRun run;
  run.path = KernelPath::kSm80;
  run.deterministic = true;
  run.expect_repeatable = true;
  run.tag = "sm80-bwd-det";
  int ran = 0;
  for (int d : {64, 256})  // 128 and 64 keys per KV block
    for (bool causal : {false, true}) {
      if (!sm80_built(d, DType::kBFloat16)) continue;
      // 8 KV blocks at either block size.
      testing::check_backward(testing::deterministic_case(d, causal, d > 128 ? 500 : 1000, 7), run);
      ++ran;
    }
  if (ran == 0) GTEST_SKIP() << "this build prunes the sm80 backward for d64 and d256 bf16";
}

// Default dispatch (kAuto): the sm90 backward takes a dense fp16 d64 call (and d40, padded; d160,
// padded to 256) where it is built and the device is sm_90, else the sm80 backward (d160 padded to
// 192); one neither can take (fp32, head dim 512) falls to the naive GPU backward instead of
// failing, and every one computes correctly.
TEST(Sm80Backward, AutoDispatchPicksSm80AndFallsBackToTheNaivePath) {
  FC_REQUIRE_GPU();
  testing::TestCase tc;
  tc.batch = 1, tc.seqlen_q = tc.seqlen_k = 70, tc.heads_q = tc.heads_kv = 1, tc.head_dim_qk = tc.head_dim_v = 64;
  // select_backward_path names the path attention_backward takes.
  testing::TestCase probe = tc;
  const KernelPath fast = testing::backward_path_takes(KernelPath::kSm90, 64, 64, DType::kFloat16, "sm90-bwd")
                              ? KernelPath::kSm90
                              : KernelPath::kSm80;
  if (sm80_built(64, DType::kFloat16)) EXPECT_EQ(chosen_path(probe), fast);
  probe.dtype = DType::kFloat32;
  EXPECT_EQ(chosen_path(probe), KernelPath::kNaiveGpu);
  probe.dtype = DType::kFloat16, probe.head_dim_qk = probe.head_dim_v = 40;
  if (sm80_built(64, DType::kFloat16)) EXPECT_EQ(chosen_path(probe), fast);  // padded to 64
  probe.head_dim_qk = probe.head_dim_v = 160;
  const bool sm90_d160 = testing::backward_path_takes(KernelPath::kSm90, 160, 160, DType::kFloat16, "sm90-bwd");
  EXPECT_EQ(chosen_path(probe), sm90_d160                          ? KernelPath::kSm90
                                : sm80_built(192, DType::kFloat16) ? KernelPath::kSm80
                                                                   : KernelPath::kNaiveGpu);
  probe.head_dim_qk = probe.head_dim_v = 512;
  EXPECT_EQ(chosen_path(probe), KernelPath::kNaiveGpu);
  testing::BackwardRun run;  // kAuto
  run.expect_repeatable = false;
  run.tag = "auto-bwd";
  testing::check_backward({"auto fp16 d64", tc}, run);
  tc.dtype = DType::kFloat32;
  testing::check_backward({"auto fp32 d64 (naive)", tc}, run);
  tc.dtype = DType::kFloat16, tc.head_dim_qk = tc.head_dim_v = 160;
  testing::check_backward({"auto fp16 d160", tc}, run);
  tc.head_dim_qk = tc.head_dim_v = 512;
  testing::check_backward({"auto fp16 d512 (naive)", tc}, run);
}

// The subset compute-sanitizer runs (memcheck, racecheck; scripts/device-check.sh): every feature
// case at d64 (128-row steps), d128 (64-row steps) and d256 (column halves) in fp16, both modes.
TEST(Sm80BackwardSanitizer, FeaturesD64D128D256BothModes) {
  FC_REQUIRE_GPU();
  testing::BackwardRun run;
  run.path = KernelPath::kSm80;
  run.tag = "sm80-bwd-san";
  for (bool deterministic : {false, true}) {
    run.deterministic = deterministic;
    run.expect_repeatable = deterministic;
    for (int d : {64, 128, 256}) {
      if (!sm80_built(d, DType::kFloat16)) continue;
      testing::check_backward_cases(testing::backward_feature_cases(DType::kFloat16, d), run);
    }
  }
}

}  // namespace
}  // namespace flashcore
