// The sm80 kernels' compact tiles (src/sm80/common/smem_budget.hpp): the variants that parts with 99 KB
// of shared memory per block (sm_86, sm_89, sm_120) run where a table entry needs more. Run here on
// any sm_80+ GPU by capping the limit the paths plan for (FLASHCORE_MAX_SMEM_PER_BLOCK=101376), each
// against the fp64 CPU reference like the paths' own sweeps: forward d192 / d256 / 256-128 / the
// wide pairs and fp32 d128, the backward d64 / d96 / d128 (every feature, deterministic mode), decode
// d128 / d256 (one and four tokens, dense and paged). Every case asserts first that its entry needs
// more than the cap, so the compact kernel is what runs.
#include <cstdlib>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "api/paths.hpp"
#include "backward_check.hpp"
#include "common/gpu.hpp"
#include "common/gpu_check.hpp"
#include "flashcore/flashcore.hpp"
#include "sm80/bwd/tile_config.hpp"
#include "sm80/decode/tile_config.hpp"
#include "sm80/fwd/tile_config.hpp"

namespace flashcore {
namespace {

using testing::TestCase;

// Sets FLASHCORE_MAX_SMEM_PER_BLOCK for the scope of a test (query_device reads it per call).
class CompactTiles : public ::testing::Test {
 protected:
  void SetUp() override { ::setenv("FLASHCORE_MAX_SMEM_PER_BLOCK", std::to_string(sm80::kCompactSmemBytes).c_str(), 1); }
  void TearDown() override { ::unsetenv("FLASHCORE_MAX_SMEM_PER_BLOCK"); }
};

// Empty when `path` takes a (dqk, dv, dt) call in this build under the cap, else why not.
std::string path_refuses(KernelPath path, int dqk, int dv, DType dt) {
  TestCase tc;
  tc.dtype = dt, tc.seqlen_q = tc.seqlen_k = 16, tc.head_dim_qk = dqk, tc.head_dim_v = dv;
  testing::HostProblem host = testing::make_problem(tc);
  AttentionParams p = host.params;
  void* dev = nullptr;
  EXPECT_EQ(cudaMalloc(&dev, 1 << 20), cudaSuccess);
  p.q = p.k = p.v = dev, p.o = dev, p.lse = static_cast<float*>(dev);
  const Support s = supports(p, path);
  cudaFree(dev);
  return s.supported ? "" : s.reason;
}

TEST_F(CompactTiles, ForwardMatchesFp64Reference) {
  FC_REQUIRE_SM(80);
  struct Pair {
    int dqk, dv;
    DType dt;
    int kernel_dqk, kernel_dv;  // the instantiation that runs it (padded, or in parts of Dv)
  };
  const Pair pairs[] = {{192, 192, DType::kBFloat16, 192, 192}, {256, 256, DType::kFloat16, 256, 256},
                        {256, 128, DType::kBFloat16, 256, 128}, {160, 160, DType::kFloat16, 192, 192},
                        {512, 512, DType::kBFloat16, 512, 256}, {128, 128, DType::kFloat32, 128, 128},
                        {256, 256, DType::kFloat32, 256, 128}};
  int ran = 0;
  for (const Pair& pr : pairs) {
    const int elem_bytes = dtype_size(pr.dt);
    ASSERT_GT(sm80::smem_bytes(pr.kernel_dqk, pr.kernel_dv, elem_bytes), sm80::kCompactSmemBytes)
        << pr.dqk << "/" << pr.dv << ": the entry would run";
    if (std::string why = path_refuses(KernelPath::kSm80, pr.dqk, pr.dv, pr.dt); !why.empty()) {
      std::printf("[compact-fwd] %d/%d %s not run: %s\n", pr.dqk, pr.dv, dtype_name(pr.dt), why.c_str());
      continue;
    }
    for (int mode = 0; mode < 4; ++mode) {
      TestCase c;
      c.head_dim_qk = pr.dqk, c.head_dim_v = pr.dv, c.dtype = pr.dt;
      c.batch = 2, c.heads_q = 4, c.heads_kv = 2, c.seqlen_q = 130, c.seqlen_k = 257;
      c.seed = 900u + uint64_t(mode) + uint64_t(pr.dqk);
      if (mode == 1) c.causal = true, c.seqlen_q = 257;
      if (mode == 2) c.window_left = 50, c.window_right = 9, c.softcap = 2.5f, c.input_scale = 4.0f;
      if (mode == 3) c.varlen_q = {65, 0, 130}, c.varlen_k = {70, 9, 257}, c.batch = 3, c.causal = true;
      FC_EXPECT_PATH_MATCHES_REFERENCE(c, KernelPath::kSm80);
    }
    ++ran;
  }
  if (ran == 0) GTEST_SKIP() << "this build prunes every forward pair with a compact tile";
}

TEST_F(CompactTiles, BackwardMatchesFp64Reference) {
  FC_REQUIRE_SM(80);
  testing::BackwardRun run;
  run.path = KernelPath::kSm80;
  run.expect_repeatable = false;  // fp32 dQ adds by atomics in any order
  run.tag = "compact-bwd";
  int ran = 0;
  for (DType dt : {DType::kFloat16, DType::kBFloat16})
    for (int d : {64, 96, 128}) {
      ASSERT_GT(sm80::bwd_smem_bytes(d, d, 2), sm80::kCompactSmemBytes) << "d" << d << ": the entry would run";
      if (!testing::backward_path_takes(KernelPath::kSm80, d, d, dt, "compact-bwd")) continue;
      ran += testing::check_backward_cases(testing::backward_feature_cases(dt, d), run);
    }
  if (ran == 0) GTEST_SKIP() << "this build prunes the sm80 backward for d64..d128";
}

TEST_F(CompactTiles, BackwardDeterministicModeIsBitwiseRepeatable) {
  FC_REQUIRE_SM(80);
  testing::BackwardRun run;
  run.path = KernelPath::kSm80;
  run.deterministic = true;
  run.expect_repeatable = true;
  run.tag = "compact-bwd-det";
  int ran = 0;
  for (int d : {64, 128})
    for (bool causal : {false, true}) {
      if (!testing::backward_path_takes(KernelPath::kSm80, d, d, DType::kBFloat16, "compact-bwd-det")) continue;
      testing::check_backward(testing::deterministic_case(d, causal, 600, 11), run);
      ++ran;
    }
  if (ran == 0) GTEST_SKIP() << "this build prunes the sm80 backward for d64 and d128 bf16";
}

TEST_F(CompactTiles, DecodeMatchesFp64Reference) {
  FC_REQUIRE_SM(80);
  int ran = 0;
  for (int d : {128, 256})
    for (DType dt : {DType::kBFloat16, DType::kFloat16}) {
      for (sm80::DecodeKv kv : {sm80::DecodeKv::kDense, sm80::DecodeKv::kSmallPages, sm80::DecodeKv::kLargePages}) {
        ASSERT_GT(sm80::decode_smem_bytes(d, d, 2, false, kv), sm80::kCompactSmemBytes)
            << "d" << d << " kv " << int(kv) << ": the entry would run";
      }
      if (std::string why = path_refuses(KernelPath::kDecode, d, d, dt); !why.empty()) {
        std::printf("[compact-decode] d%d %s not run: %s\n", d, dtype_name(dt), why.c_str());
        continue;
      }
      int index = 0;
      for (int page_size : {0, 16, 256})
        for (int seqlen_q : {1, 4}) {  // 4 tokens of GQA 8: 32 packed rows, the wide tiles
          TestCase c;
          c.head_dim_qk = c.head_dim_v = d, c.dtype = dt;
          c.seed = 1300u + uint64_t(index) + uint64_t(d);
          c.batch = 3, c.seqlen_q = seqlen_q, c.seqlen_k = 1500, c.heads_kv = 2, c.heads_q = 16;
          c.page_size = page_size;
          if (page_size > 0) c.seqused_k = {1500, 1, 753};
          c.causal = index % 2 == 0;
          c.num_splits = std::vector<int>{0, 1, 5}[size_t(index % 3)];
          if (index == 1) c.softcap = 2.5f;
          FC_EXPECT_PATH_MATCHES_REFERENCE(c, KernelPath::kDecode);
          ++index;
        }
      ++ran;
    }
  if (ran == 0) GTEST_SKIP() << "this build prunes the decode path for d128 and d256";
}

// Without the cap the same calls plan for the device's own limit: on an A100 / Hopper the entries
// themselves (so the sweeps of the paths' own tests cover them), and the cap is not sticky.
TEST(CompactTilesCap, MalformedValueIsRejectedAndTheCapIsPerCall) {
  FC_REQUIRE_SM(80);
  int optin = 0;
  ASSERT_EQ(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, 0), cudaSuccess);
  if (optin < sm80::smem_bytes(256, 256, 2)) GTEST_SKIP() << "the device runs d256's compact tile anyway";
  const std::string uncapped = path_refuses(KernelPath::kSm80, 256, 256, DType::kFloat16);
  if (!uncapped.empty()) GTEST_SKIP() << "no sm80 d256 fp16 kernel in this build: " << uncapped;
  ::setenv("FLASHCORE_MAX_SMEM_PER_BLOCK", "50000", 1);  // below even the compact d256 tile (99 KB)
  const std::string refused = path_refuses(KernelPath::kSm80, 256, 256, DType::kFloat16);
  EXPECT_NE(refused.find("the device allows 50000"), std::string::npos) << refused;
  ::setenv("FLASHCORE_MAX_SMEM_PER_BLOCK", "99KB", 1);
  const std::string malformed = path_refuses(KernelPath::kSm80, 256, 256, DType::kFloat16);
  EXPECT_NE(malformed.find("FLASHCORE_MAX_SMEM_PER_BLOCK"), std::string::npos) << malformed;
  ::unsetenv("FLASHCORE_MAX_SMEM_PER_BLOCK");
  EXPECT_EQ(path_refuses(KernelPath::kSm80, 256, 256, DType::kFloat16), "");
}

}  // namespace
}  // namespace flashcore
