// Head dims above 256 against the fp64 reference, on both paths that take them: the sm90 wide
// kernels (src/sm90/wide; built with FLASHCORE_BUILD_SM90_WIDE) and the sm80 path's 512/256, 576/256
// and 1024/256 tiles (launched over parts of Dv). Every tile and padded / split-Dv calls: tails, both causal
// alignments (rows with no key), a window with softcap, ALiBi, GQA and MQA, PyTorch's BHSD strides,
// no keys at all, varlen and seqused_k. Skips, saying so, in builds without them.
#include <gtest/gtest.h>

#include <cuda_runtime.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "api/paths.hpp"
#include "common/gpu.hpp"
#include "common/gpu_check.hpp"
#include "common/tensor_util.hpp"
#include "flashcore/flashcore.hpp"

namespace flashcore {
namespace {

using testing::TestCase;

// A dense (dqk, dv) call for a path's supports(): 16-byte aligned pointers that are never used.
AttentionParams dense_call(int dqk, int dv, DType dt) {
  AttentionParams p;
  p.batch = 1, p.seqlen_q = p.seqlen_k = 64, p.heads_q = p.heads_kv = 1, p.head_dim_qk = dqk, p.head_dim_v = dv;
  p.dtype = dt;
  p.q = p.k = p.v = p.o = reinterpret_cast<void*>(uintptr_t(1) << 20);
  set_dense_strides(p);
  return p;
}

// The sm90 path's answer for a dense (dqk, dv) call on an H100/H200 (no device needed): "" when it
// takes it; its reason otherwise.
std::string sm90_why_not(int dqk, int dv, DType dt) {
  detail::DeviceInfo info;
  info.has_device = true, info.cc_major = 9, info.cc_minor = 0, info.sm_count = 132;
  info.max_smem_per_block_optin = 227 * 1024;
  return detail::sm90_path().supports(dense_call(dqk, dv, dt), info);
}

// Whether this build's wide kernels take (dqk, dv, dt); any reason but a pruned build fails.
bool wide_built(int dqk, int dv, DType dt) {
  const std::string why = sm90_why_not(dqk, dv, dt);
  if (why.empty()) return true;
  const bool pruned = why.find("need its wide kernels") != std::string::npos ||
                      why.find("not covered by this build") != std::string::npos;
  EXPECT_TRUE(pruned) << dqk << "/" << dv << ": " << why;
  return false;
}

std::vector<std::pair<std::string, TestCase>> feature_cases(DType dt, int dqk, int dv) {
  std::vector<std::pair<std::string, TestCase>> out;
  auto base = [&] {
    TestCase tc;
    tc.dtype = dt, tc.head_dim_qk = dqk, tc.head_dim_v = dv, tc.heads_q = tc.heads_kv = 2, tc.seed = dqk + dv;
    return tc;
  };
  TestCase tc = base();
  tc.seqlen_q = tc.seqlen_k = 300, tc.input_scale = 4;
  out.push_back({"dense 300, inputs x4", tc});
  tc = base();
  tc.seqlen_q = 130, tc.seqlen_k = 333, tc.causal = true;
  out.push_back({"causal bottom-right", tc});
  tc = base();
  tc.seqlen_q = 200, tc.seqlen_k = 70, tc.causal = true, tc.align = MaskAlign::kBottomRight;
  out.push_back({"rows without keys", tc});
  tc = base();
  tc.seqlen_q = 150, tc.seqlen_k = 260, tc.causal = true, tc.align = MaskAlign::kTopLeft;
  out.push_back({"causal top-left", tc});
  tc = base();
  tc.seqlen_q = tc.seqlen_k = 257, tc.window_left = 70, tc.window_right = 9, tc.softcap = 30, tc.input_scale = 8;
  out.push_back({"window + softcap", tc});
  tc = base();
  tc.batch = 2, tc.seqlen_q = 140, tc.seqlen_k = 200, tc.causal = true, tc.softcap = 20;
  tc.alibi = testing::AlibiLayout::kPerBatchHead;
  out.push_back({"ALiBi per (batch, head) + softcap, causal", tc});
  tc = base();
  tc.varlen_q = {70, 130}, tc.varlen_k = {200, 64}, tc.batch = 2, tc.alibi = testing::AlibiLayout::kPerHead;
  out.push_back({"ALiBi per head, varlen", tc});
  tc = base();
  tc.heads_q = 4, tc.heads_kv = 1, tc.seqlen_q = 65, tc.seqlen_k = 190;
  out.push_back({"MQA 4/1", tc});
  tc = base();
  tc.batch = 2, tc.heads_q = 4, tc.heads_kv = 2, tc.seqlen_q = 100, tc.seqlen_k = 129;
  tc.layout = testing::Layout::kBHSD;
  out.push_back({"GQA, BHSD strides", tc});
  tc = base();
  tc.seqlen_q = 70, tc.seqlen_k = 0;  // no keys: o = 0, lse = -inf
  out.push_back({"no keys", tc});
  tc = base();
  tc.varlen_q = {33, 0, 171, 64}, tc.varlen_k = {40, 5, 300, 64}, tc.seqused_k = {31, 5, 290, 64}, tc.batch = 4;
  tc.causal = true, tc.heads_q = 4, tc.heads_kv = 2;
  out.push_back({"varlen + seqused_k, causal GQA", tc});
  tc = base();
  tc.varlen_q = {100, 1, 130}, tc.varlen_k = {100, 200, 64}, tc.batch = 3;
  out.push_back({"varlen", tc});
  tc = base();
  tc.seqused_k = {100, 7}, tc.batch = 2, tc.seqlen_q = 90, tc.seqlen_k = 150;
  out.push_back({"dense + seqused_k", tc});
  return out;
}

int check_wide(int dqk, int dv) {
  int ran = 0;
  for (DType dt : {DType::kBFloat16, DType::kFloat16}) {
    if (!wide_built(dqk, dv, dt)) continue;
    for (const auto& [name, tc] : feature_cases(dt, dqk, dv)) {
      SCOPED_TRACE(std::to_string(dqk) + "/" + std::to_string(dv) + " " + name);
      FC_EXPECT_PATH_MATCHES_REFERENCE(tc, KernelPath::kSm90);
    }
    ++ran;
  }
  return ran;
}

// The sm80 path's answer for a dense (dqk, dv) call on this device: "" when it takes it.
std::string sm80_why_not(int dqk, int dv, DType dt) {
  detail::DeviceInfo info;
  info.has_device = true;
  const int cc = testing::gpu_compute_capability();
  info.cc_major = cc / 10, info.cc_minor = cc % 10;
  int dev = 0, optin = 0;
  cudaGetDevice(&dev);
  cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev);
  info.max_smem_per_block_optin = size_t(optin);
  return detail::sm80_path().supports(dense_call(dqk, dv, dt), info);
}

int check_sm80(int dqk, int dv) {
  int ran = 0;
  for (DType dt : {DType::kBFloat16, DType::kFloat16}) {
    const std::string why = sm80_why_not(dqk, dv, dt);
    if (!why.empty()) {
      EXPECT_NE(why.find("not in this build"), std::string::npos) << dqk << "/" << dv << ": " << why;
      continue;
    }
    for (const auto& [name, tc] : feature_cases(dt, dqk, dv)) {
      SCOPED_TRACE(std::to_string(dqk) + "/" + std::to_string(dv) + " sm80 " + name);
      FC_EXPECT_PATH_MATCHES_REFERENCE(tc, KernelPath::kSm80);
    }
    ++ran;
  }
  return ran;
}

#define FC_REQUIRE_WIDE_DEVICE()                                                                        \
  FC_REQUIRE_SM(90);                                                                                    \
  if (testing::gpu_compute_capability() != 90) GTEST_SKIP() << "the sm90 path needs exactly sm_90"

// The tiles' own head dims.
TEST(Sm90Wide, TilesMatchTheFp64Reference) {
  FC_REQUIRE_WIDE_DEVICE();
  int ran = 0;
  for (auto [dqk, dv] : {std::pair{384, 384}, {512, 512}, {576, 512}}) ran += check_wide(dqk, dv);
  if (ran == 0) GTEST_SKIP() << "no sm90 wide kernel in this build";
}

// Calls on a wider tile (zeros past their columns, O written only in them) and Dv in parts:
// 320 -> 384; 448/320 -> 512; 1024/1024 and 768/768 -> the 1024 tile, two parts of 512 columns;
// 128/512 (Dqk below 256) -> 384 / 512.
TEST(Sm90Wide, PaddedAndSplitDvMatchTheFp64Reference) {
  FC_REQUIRE_WIDE_DEVICE();
  int ran = 0;
  for (auto [dqk, dv] : {std::pair{320, 320}, {448, 320}, {1024, 1024}, {768, 768}, {128, 512}}) {
    ran += check_wide(dqk, dv);
  }
  if (ran == 0) GTEST_SKIP() << "no sm90 wide kernel in this build";
}

// The sm80 path above 256: the tiles' own Dqk with Dv in two and four 256-column parts (512/512,
// 1024/1024); padded Dqk with a partial last part (384/384 -> 512/256, two parts, the second 128
// columns; 768/640 -> 1024/256 in three parts); Dqk below 256 with a wide Dv (128/512 runs on
// 128/128 in four parts).
TEST(Sm80Wide, TilesAndPartsMatchTheFp64Reference) {
  FC_REQUIRE_SM(80);
  int ran = 0;
  for (auto [dqk, dv] :
       {std::pair{512, 512}, {576, 512}, {1024, 1024}, {384, 384}, {768, 640}, {128, 512}, {320, 320}}) {
    ran += check_sm80(dqk, dv);
  }
  if (ran == 0) GTEST_SKIP() << "no sm80 kernel for head dims above 256 in this build";
}

// For compute-sanitizer (the sweep above takes minutes under racecheck): both tile shapes (64 and
// 32 query rows), every part, bf16, three of the feature cases.
TEST(Sm80Sanitizer, WideTilesEveryPart) {
  FC_REQUIRE_SM(80);
  int ran = 0;
  for (auto [dqk, dv] : {std::pair{512, 512}, {1024, 1024}}) {
    if (!sm80_why_not(dqk, dv, DType::kBFloat16).empty()) continue;
    for (const auto& [name, tc] : feature_cases(DType::kBFloat16, dqk, dv)) {
      if (name != "causal bottom-right" && name != "window + softcap" && name != "varlen + seqused_k, causal GQA") {
        continue;
      }
      SCOPED_TRACE(std::to_string(dqk) + "/" + std::to_string(dv) + " sm80 " + name);
      FC_EXPECT_PATH_MATCHES_REFERENCE(tc, KernelPath::kSm80);
    }
    ++ran;
  }
  if (ran == 0) GTEST_SKIP() << "no sm80 kernel for head dims above 256 in this build";
}

}  // namespace
}  // namespace flashcore
