// The sm90 backward (src/sm90/bwd/) against the fp64 CPU reference backward on the same inputs
// (tests/gpu/backward_check.hpp): features x head dims x dtypes x tails, with several KV blocks per
// head and several query steps per block; padded head dims; deterministic mode bitwise repeatable;
// automatic selection.
#include "backward_check.hpp"

namespace flashcore {
namespace {

using testing::BackwardCase;

std::vector<BackwardCase> feature_cases(DType dt, int dqk, int dv) {
  std::vector<BackwardCase> out;
  auto base = [&] {
    testing::TestCase tc;
    tc.dtype = dt;
    tc.batch = 2, tc.seqlen_q = 200, tc.seqlen_k = 333, tc.heads_q = tc.heads_kv = 2;
    tc.head_dim_qk = dqk, tc.head_dim_v = dv;
    tc.seed = 300 + dqk + dv;
    return tc;
  };
  testing::TestCase tc = base();
  out.push_back({"dense Sq 200 Sk 333", tc});
  tc.causal = true, tc.heads_q = 6, tc.heads_kv = 2;
  out.push_back({"causal GQA 6/2", tc});
  tc = base();
  tc.causal = true, tc.align = MaskAlign::kTopLeft, tc.seqlen_q = 300, tc.seqlen_k = 140;
  out.push_back({"causal top-left Sq > Sk", tc});
  tc.alibi = testing::AlibiLayout::kPerHead;
  out.push_back({"causal top-left Sq > Sk, ALiBi", tc});
  tc = base();
  tc.window_left = 40, tc.window_right = 7, tc.input_scale = 2.0f;
  out.push_back({"window 40/7, inputs x2", tc});
  tc.softcap = 3.0f;
  out.push_back({"window 40/7, softcap 3, inputs x2", tc});
  tc = base();
  tc.causal = true, tc.seqlen_q = 260, tc.seqlen_k = 100;  // bottom-right: rows 0..159 see no key
  out.push_back({"rows without keys", tc});
  tc = base();
  tc.heads_q = 4, tc.heads_kv = 1, tc.seqlen_q = tc.seqlen_k = 129;
  out.push_back({"MQA 4/1, one past a block", tc});
  tc = base();
  tc.batch = 1, tc.seqlen_q = tc.seqlen_k = 1000, tc.heads_q = 4, tc.heads_kv = 2, tc.causal = true;
  out.push_back({"causal S 1000, 8 KV blocks", tc});
  tc = base();
  tc.varlen_q = {33, 0, 171, 64}, tc.varlen_k = {40, 5, 300, 64}, tc.seqused_k = {31, 5, 290, 64}, tc.batch = 4;
  tc.causal = true, tc.varlen_tail_q = 5, tc.varlen_tail_k = 9;  // tokens no sequence owns: zero gradients
  out.push_back({"varlen + seqused_k, causal, tail tokens", tc});
  tc = base();
  tc.varlen_q = {300, 129, 64}, tc.varlen_k = {300, 129, 64}, tc.batch = 3, tc.heads_q = 4, tc.heads_kv = 2;
  tc.window_left = 70, tc.window_right = 20;
  out.push_back({"varlen GQA 4/2, window 70/20", tc});
  tc = base();
  tc.seqused_k = {250, 333};
  out.push_back({"dense, seqused_k", tc});
  return out;
}

bool sm90_takes(int dqk, int dv, DType dt) {
  return testing::backward_path_takes(KernelPath::kSm90, dqk, dv, dt, "sm90-bwd");
}

TEST(Sm90Backward, MatchesTheFp64CpuReference) {
  FC_REQUIRE_GPU();
  testing::BackwardRun run;
  run.path = KernelPath::kSm90;
  run.expect_repeatable = false;  // fp32 dQ adds (bulk reduce-add) in any order
  run.tag = "sm90-bwd";
  int ran = 0;
  for (DType dt : {DType::kFloat16, DType::kBFloat16})
    for (int d : {64, 96, 128, 256}) {
      if (!sm90_takes(d, d, dt)) continue;
      ran += testing::check_backward_cases(feature_cases(dt, d, d), run);
    }
  if (ran == 0) GTEST_SKIP() << "the sm90 backward is not in this build or the device is not sm_90";
}

// Head dims without a kernel of their own run padded on the covering one: 40 -> 64, 80 -> 96,
// 112 -> 128, 72/40 -> 96/96, 160 and 192/128 -> 256 (the column halves: 192 leaves the second
// half's last chunk empty, 160 half of it); zeros past the call's columns in the loaded tiles, and
// dQ, dK, dV written only in its columns.
TEST(Sm90Backward, PaddedHeadDimsMatchTheFp64CpuReference) {
  FC_REQUIRE_GPU();
  testing::BackwardRun run;
  run.path = KernelPath::kSm90;
  run.expect_repeatable = false;
  run.tag = "sm90-bwd-padded";
  int ran = 0;
  const std::pair<int, int> dims[] = {{40, 40}, {80, 80}, {112, 112}, {72, 40}, {160, 160}, {192, 128}};
  for (DType dt : {DType::kFloat16, DType::kBFloat16})
    for (auto [dqk, dv] : dims) {
      if (!sm90_takes(dqk, dv, dt)) continue;
      ran += testing::check_backward_cases(feature_cases(dt, dqk, dv), run);
    }
  if (ran == 0) GTEST_SKIP() << "no covering sm90 backward kernel in this build";
}

// Default dispatch (kAuto) on sm_90: the sm90 backward takes every 16-bit call with head dims up to
// 256 (softcap, ALiBi, varlen, deterministic included); fp32 falls to the naive GPU backward; each
// computes correctly.
TEST(Sm90Backward, AutoDispatchPicksSm90) {
  FC_REQUIRE_GPU();
  if (!sm90_takes(64, 64, DType::kBFloat16)) GTEST_SKIP() << "the sm90 backward d64 bf16 is not in this build";
  testing::TestCase tc;
  tc.dtype = DType::kBFloat16, tc.batch = 2, tc.seqlen_q = 150, tc.seqlen_k = 170, tc.heads_q = tc.heads_kv = 2;
  tc.head_dim_qk = tc.head_dim_v = 64, tc.seed = 11;
  std::vector<BackwardCase> cases;
  cases.push_back({"plain", tc});
  testing::TestCase v = tc;
  v.softcap = 5.0f;
  cases.push_back({"softcap", v});
  v = tc;
  v.alibi = testing::AlibiLayout::kPerHead, v.causal = true;
  cases.push_back({"ALiBi causal", v});
  v = tc;
  v.varlen_q = {70, 80}, v.varlen_k = {90, 80};
  cases.push_back({"varlen", v});
  v = tc;
  v.head_dim_qk = v.head_dim_v = 40;
  cases.push_back({"d40 (padded to 64)", v});
  for (const BackwardCase& c : cases) {
    SCOPED_TRACE(c.name);
    EXPECT_EQ(testing::chosen_backward_path(c.tc), KernelPath::kSm90);
    testing::BackwardRun run;  // kAuto
    run.expect_repeatable = false;
    run.tag = "sm90-bwd-auto";
    testing::check_backward(c, run);
  }
  v = tc;
  v.dtype = DType::kFloat32;
  EXPECT_EQ(testing::chosen_backward_path(v), KernelPath::kNaiveGpu);
  v = tc;
  v.head_dim_qk = v.head_dim_v = 160;  // the sm90 d256 kernel where built, else the sm80 one (padded to 192)
  EXPECT_EQ(testing::chosen_backward_path(v),
            sm90_takes(160, 160, v.dtype) ? KernelPath::kSm90
            : testing::backward_path_takes(KernelPath::kSm80, 160, 160, v.dtype, "sm80-bwd") ? KernelPath::kSm80
                                                                                           : KernelPath::kNaiveGpu);
}

// A thread that has made no CUDA call has no current context, and the driver's tensor-map encoder
// needs one: the call binds the device's context itself (PyTorch's autograd threads call the
// backward this way, having only set their device).
TEST(Sm90Backward, RunsOnAThreadWithNoCurrentContext) {
  FC_REQUIRE_GPU();
  int d = 0;
  for (int candidate : {128, 64, 96, 256}) {
    if (d == 0 && sm90_takes(candidate, candidate, DType::kFloat16)) d = candidate;
  }
  if (d == 0) GTEST_SKIP() << "the sm90 backward is not in this build or the device is not sm_90";
  testing::TestCase tc;
  tc.dtype = DType::kFloat16, tc.batch = 1, tc.seqlen_q = 130, tc.seqlen_k = 200, tc.heads_q = 2, tc.heads_kv = 1;
  tc.head_dim_qk = tc.head_dim_v = d, tc.causal = true, tc.seed = 21;
  testing::BackwardRun run;
  run.path = KernelPath::kSm90;
  run.expect_repeatable = false;
  run.on_fresh_thread = true;
  run.tag = "sm90-bwd-thread";
  testing::check_backward({"fresh thread", tc}, run);
}

// Deterministic mode: dQ added in a fixed order (KV blocks from the last down, each waiting for its
// turn), so two launches give bitwise-equal gradients; every feature case, d64 (dQ split by rows),
// d128 (by columns; both by the dQ writer warp) and d256 (dQ by the dQ pass: no adds at all).
TEST(Sm90Backward, DeterministicModeIsBitwiseRepeatable) {
  FC_REQUIRE_GPU();
  testing::BackwardRun run;
  run.path = KernelPath::kSm90;
  run.deterministic = true;
  run.expect_repeatable = true;
  run.tag = "sm90-bwd-det";
  int ran = 0;
  for (int d : {64, 128, 256}) {
    if (!sm90_takes(d, d, DType::kBFloat16)) continue;
    ran += testing::check_backward_cases(feature_cases(DType::kBFloat16, d, d), run);
  }
  if (ran == 0) GTEST_SKIP() << "the sm90 backward is not in this build or the device is not sm_90";
}

// The subset compute-sanitizer runs (memcheck, racecheck; scripts/device-check.sh): every feature
// case at d64 (128-row steps, dQ split by rows), d128 (64-row steps, split by columns) and d256
// (64 keys per CTA, column halves, then the dQ pass) in fp16, both dQ modes.
TEST(Sm90BackwardSanitizer, FeaturesEveryTileBothModes) {
  FC_REQUIRE_GPU();
  testing::BackwardRun run;
  run.path = KernelPath::kSm90;
  run.tag = "sm90-bwd-san";
  int ran = 0;
  for (bool deterministic : {false, true}) {
    run.deterministic = deterministic;
    run.expect_repeatable = deterministic;
    for (int d : {64, 128, 256}) {
      if (!sm90_takes(d, d, DType::kFloat16)) continue;
      ran += testing::check_backward_cases(feature_cases(DType::kFloat16, d, d), run);
    }
  }
  if (ran == 0) GTEST_SKIP() << "the sm90 backward is not in this build or the device is not sm_90";
}

}  // namespace
}  // namespace flashcore
