// The sm90 wide kernels (head dims above 256, src/sm90/wide; built with FLASHCORE_BUILD_SM90_WIDE=ON)
// against the fp64 reference: tails, both causal alignments (rows with no key), a window with softcap,
// GQA and MQA, PyTorch's BHSD strides, no keys at all. Skips, saying so, in builds without them.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "api/paths.hpp"
#include "common/gpu.hpp"
#include "common/gpu_check.hpp"
#include "common/tensor_util.hpp"
#include "flashcore/flashcore.hpp"

namespace flashcore {
namespace {

using testing::TestCase;

// The sm90 path's answer for a d512 call on an H100/H200 (no device needed): its reason when this
// build has no wide kernels, else "".
std::string wide_not_in_build() {
  detail::DeviceInfo info;
  info.has_device = true, info.cc_major = 9, info.cc_minor = 0, info.sm_count = 132;
  info.max_smem_per_block_optin = 227 * 1024;
  AttentionParams p;
  p.batch = 1, p.seqlen_q = p.seqlen_k = 64, p.heads_q = p.heads_kv = 1, p.head_dim_qk = p.head_dim_v = 512;
  p.dtype = DType::kBFloat16;
  p.q = p.k = p.v = p.o = reinterpret_cast<void*>(uintptr_t(1) << 20);  // 16-byte aligned, never used
  set_dense_strides(p);
  const std::string why = detail::sm90_path().supports(p, info);
  return why.find("need its wide kernels") != std::string::npos ? why : "";
}

TEST(Sm90Wide, D512MatchesTheFp64Reference) {
  FC_REQUIRE_SM(90);
  if (testing::gpu_compute_capability() != 90) GTEST_SKIP() << "the sm90 path needs exactly sm_90";
  if (const std::string why = wide_not_in_build(); !why.empty()) GTEST_SKIP() << "not in this build: " << why;
  for (DType dt : {DType::kBFloat16, DType::kFloat16}) {
    auto base = [&] {
      TestCase tc;
      tc.dtype = dt, tc.head_dim_qk = tc.head_dim_v = 512, tc.heads_q = tc.heads_kv = 2, tc.seed = 512;
      return tc;
    };
    TestCase tc = base();
    tc.seqlen_q = tc.seqlen_k = 300, tc.input_scale = 4;
    FC_EXPECT_PATH_MATCHES_REFERENCE(tc, KernelPath::kSm90);
    tc = base();
    tc.seqlen_q = 130, tc.seqlen_k = 333, tc.causal = true;
    FC_EXPECT_PATH_MATCHES_REFERENCE(tc, KernelPath::kSm90);
    tc = base();
    tc.seqlen_q = 200, tc.seqlen_k = 70, tc.causal = true, tc.align = MaskAlign::kBottomRight;  // rows without keys
    FC_EXPECT_PATH_MATCHES_REFERENCE(tc, KernelPath::kSm90);
    tc = base();
    tc.seqlen_q = 150, tc.seqlen_k = 260, tc.causal = true, tc.align = MaskAlign::kTopLeft;
    FC_EXPECT_PATH_MATCHES_REFERENCE(tc, KernelPath::kSm90);
    tc = base();
    tc.seqlen_q = tc.seqlen_k = 257, tc.window_left = 70, tc.window_right = 9, tc.softcap = 30, tc.input_scale = 8;
    FC_EXPECT_PATH_MATCHES_REFERENCE(tc, KernelPath::kSm90);
    tc = base();
    tc.heads_q = 4, tc.heads_kv = 1, tc.seqlen_q = 65, tc.seqlen_k = 190;
    FC_EXPECT_PATH_MATCHES_REFERENCE(tc, KernelPath::kSm90);
    tc = base();
    tc.batch = 2, tc.heads_q = 4, tc.heads_kv = 2, tc.seqlen_q = 100, tc.seqlen_k = 129;
    tc.layout = testing::Layout::kBHSD;
    FC_EXPECT_PATH_MATCHES_REFERENCE(tc, KernelPath::kSm90);
    tc = base();
    tc.seqlen_q = 70, tc.seqlen_k = 0;  // no keys: o = 0, lse = -inf
    FC_EXPECT_PATH_MATCHES_REFERENCE(tc, KernelPath::kSm90);
  }
}

}  // namespace
}  // namespace flashcore
