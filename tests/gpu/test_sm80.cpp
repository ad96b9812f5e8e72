// The sm80 (mma.sync) forward path against the fp64 CPU reference (tests/common/gpu_check): every
// forward rule of the semantics (causal in both alignments, sliding window, softcap, ALiBi, GQA/MQA,
// varlen with seqused_k, Sq != Sk both ways, lengths that are not tile multiples, strided layouts)
// for every head-dim pair and dtype of the build, with the project tolerance (error <= 2x the naive
// same-dtype computation's; fp32 inputs on 3xTF32: the same, i.e. 2x the fp32 SIMT computation's
// error + 1e-5 relative, design.md's SIMT bound), NaN poison overwritten everywhere and padding
// untouched.
// Large shapes are compared with the naive GPU reference.
#include <algorithm>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include "api/paths.hpp"
#include "common/gpu.hpp"
#include "common/gpu_check.hpp"
#include "flashcore/flashcore.hpp"

namespace flashcore {
namespace {

using testing::AlibiLayout;
using testing::Layout;
using testing::TestCase;

enum class MaskMode { kNone, kCausalBottomRight, kCausalTopLeft, kWindow, kSoftcap, kAlibi };

void apply_mode(TestCase& c, MaskMode mode, std::mt19937& rng) {
  switch (mode) {
    case MaskMode::kNone: break;
    case MaskMode::kCausalBottomRight: c.causal = true; break;
    case MaskMode::kCausalTopLeft: c.causal = true; c.align = MaskAlign::kTopLeft; break;
    case MaskMode::kWindow:
      c.window_left = int(rng() % 100);
      c.window_right = int(rng() % 40);
      break;
    case MaskMode::kSoftcap: c.softcap = 2.5f; break;
    case MaskMode::kAlibi: c.alibi = AlibiLayout::kPerBatchHead; break;
  }
}

// Head-dim pairs and dtypes the sm80 path instantiates (a test skips what the build pruned).
struct Variant {
  int dqk, dv;
  DType dtype;
};
std::vector<Variant> all_variants() {
  const int pairs[][2] = {{32, 32},   {64, 64},   {96, 96},  {128, 128}, {192, 192},
                          {256, 256}, {192, 128}, {128, 64}, {64, 128},  {256, 128}};
  std::vector<Variant> out;
  for (const auto& pr : pairs)
    for (DType dt : {DType::kFloat16, DType::kBFloat16}) out.push_back({pr[0], pr[1], dt});
  // 3xTF32; d192 / d256 run as two launches of the 192/96 / 256/128 kernel (one per half of V).
  for (int d : {32, 64, 96, 128, 192, 256}) out.push_back({d, d, DType::kFloat32});
  // Head dims without a kernel of their own run padded on the covering pair (api/built_kernels.hpp):
  // 40 -> 64, 80 -> 96, 160 -> 192, 72/40 -> 96/96 (unequal), 8 -> 32; fp32 80 -> 96 and 160 as two
  // launches of 192/96.
  const int padded[][2] = {{40, 40}, {80, 80}, {160, 160}, {72, 40}, {8, 8}};
  for (const auto& pr : padded)
    for (DType dt : {DType::kFloat16, DType::kBFloat16}) out.push_back({pr[0], pr[1], dt});
  out.push_back({80, 80, DType::kFloat32});
  out.push_back({160, 160, DType::kFloat32});
  return out;
}
std::string variant_name(const ::testing::TestParamInfo<Variant>& info) {
  return "d" + std::to_string(info.param.dqk) + "_" + std::to_string(info.param.dv) + "_" +
         dtype_name(info.param.dtype);
}

// Empty when this build and device run the variant on the sm80 path, otherwise why not.
std::string variant_unavailable(const Variant& v) {
  AttentionParams p;
  p.head_dim_qk = v.dqk;
  p.head_dim_v = v.dv;
  p.dtype = v.dtype;
  detail::DeviceInfo info;
  info.has_device = true;
  const int cc = testing::gpu_compute_capability();
  info.cc_major = cc / 10;
  info.cc_minor = cc % 10;
  int dev = 0, optin = 0;
  cudaGetDevice(&dev);
  cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev);
  info.max_smem_per_block_optin = size_t(optin);
  // Null tensor pointers are 16-byte aligned: only dtype / head dims / arch / smem can refuse.
  return detail::sm80_path().supports(p, info);
}

// First statement of every sweep test: needs sm_80+, skips (saying why) what the build pruned.
#define FC_REQUIRE_SM80_VARIANT(v)                                  \
  do {                                                              \
    FC_REQUIRE_SM(80);                                              \
    const std::string why_ = variant_unavailable(v);                \
    if (!why_.empty()) GTEST_SKIP() << why_;                        \
  } while (0)

TestCase case_for(const Variant& v, uint64_t seed) {
  TestCase c;
  c.head_dim_qk = v.dqk;
  c.head_dim_v = v.dv;
  c.dtype = v.dtype;
  c.seed = seed;
  return c;
}

void expect_sm80_matches(const TestCase& c) { FC_EXPECT_PATH_MATCHES_REFERENCE(c, KernelPath::kSm80); }

class Sm80Sweep : public ::testing::TestWithParam<Variant> {};

// Every mask mode twice (Sq < Sk, then Sq > Sk), with a GQA ratio cycling through 1/4/8, lengths
// drawn from {1, 7, 63, 65, 257, 1023} (never tile multiples) and input scale 1 or 10.
TEST_P(Sm80Sweep, MatchesFp64ReferenceForEveryMaskMode) {
  const Variant v = GetParam();
  FC_REQUIRE_SM80_VARIANT(v);
  const int lengths[] = {1, 7, 63, 65, 257, 1023};
  const int ratios[] = {1, 4, 8};
  std::mt19937 rng(uint32_t(v.dqk * 7919 + v.dv * 31 + int(v.dtype)));
  const MaskMode modes[] = {MaskMode::kNone,   MaskMode::kCausalBottomRight, MaskMode::kCausalTopLeft,
                            MaskMode::kWindow, MaskMode::kSoftcap,           MaskMode::kAlibi};
  int index = 0;
  for (MaskMode mode : modes) {
    for (int rep = 0; rep < 2; ++rep, ++index) {
      TestCase c = case_for(v, 1000u + uint64_t(index));
      int a = lengths[rng() % 6], b = lengths[rng() % 6];
      if (a == b) b = lengths[(std::find(lengths, lengths + 6, b) - lengths + 1) % 6];
      c.seqlen_q = rep == 0 ? std::min(a, b) : std::max(a, b);
      c.seqlen_k = rep == 0 ? std::max(a, b) : std::min(a, b);
      const int ratio = ratios[index % 3];
      // Keep the fp64 reference affordable: fewer heads for the longest pairs.
      const double work = double(c.seqlen_q) * c.seqlen_k * (c.head_dim_qk + c.head_dim_v);
      c.heads_kv = work * ratio * 2 <= 3e8 ? 2 : 1;
      c.heads_q = c.heads_kv * ratio;
      c.batch = work * c.heads_q * 2 <= 3e8 ? 2 : 1;
      c.input_scale = (index % 2 == 0) ? 1.0f : 10.0f;
      apply_mode(c, mode, rng);
      expect_sm80_matches(c);
    }
  }
}

// Packed sequences with cu_seqlens (one of them empty), seqused_k shortening the keys, causal,
// window and GQA 4.
TEST_P(Sm80Sweep, VarlenWithSequsedKMatchesFp64Reference) {
  const Variant v = GetParam();
  FC_REQUIRE_SM80_VARIANT(v);
  for (int variant = 0; variant < 3; ++variant) {
    TestCase c = case_for(v, 77u + uint64_t(variant));
    c.heads_kv = 2;
    c.heads_q = variant == 2 ? 8 : 2;
    c.varlen_q = {1, 130, 7, 65};
    c.varlen_k = {63, 129, 0, 200};
    c.batch = 4;
    if (variant >= 1) c.seqused_k = {40, 129, 0, 77};
    if (variant == 1) c.causal = true;
    if (variant == 2) {
      c.window_left = 20;
      c.window_right = 5;
    }
    c.input_scale = variant == 1 ? 10.0f : 1.0f;
    expect_sm80_matches(c);
  }
}

// PyTorch's [B, H, S, D] layout and a padded [B, S, H, D] layout, through explicit strides.
TEST_P(Sm80Sweep, StridedLayoutsMatchFp64Reference) {
  const Variant v = GetParam();
  FC_REQUIRE_SM80_VARIANT(v);
  for (Layout layout : {Layout::kBHSD, Layout::kPaddedBSHD}) {
    TestCase c = case_for(v, 5u);
    c.layout = layout;
    c.batch = 2;
    c.heads_q = 4;
    c.heads_kv = 2;
    c.seqlen_q = 200;
    c.seqlen_k = 131;
    c.causal = true;
    c.align = MaskAlign::kTopLeft;
    expect_sm80_matches(c);
  }
}

INSTANTIATE_TEST_SUITE_P(AllHeadDims, Sm80Sweep, ::testing::ValuesIn(all_variants()), variant_name);

// Shapes too large for the CPU reference, against the naive GPU reference (fp32 math; itself checked
// against fp64 in test_naive_gpu.cpp): S = 4097 (not a tile multiple), causal and not. Bound: the
// relative Frobenius error of a 16-bit output is a few units of the dtype's rounding (unit
// roundoff u: 2^-11 fp16, 2^-8 bf16); P is rounded too, so allow 8u. fp32 (3xTF32): both sides are
// fp32-accurate (~1e-6 each in the host emulation), so allow 1e-5.
TEST(Sm80LargeShapes, MatchNaiveGpuReference) {
  FC_REQUIRE_SM(80);
  for (Variant v : {Variant{128, 128, DType::kBFloat16}, Variant{64, 64, DType::kFloat16},
                    Variant{128, 128, DType::kFloat32}, Variant{64, 64, DType::kFloat32}}) {
    if (!variant_unavailable(v).empty()) continue;
    for (bool causal : {false, true}) {
      TestCase c = case_for(v, 4097u);
      c.batch = 1;
      c.heads_q = 4;
      c.heads_kv = 1;
      c.seqlen_q = c.seqlen_k = 4097;
      c.causal = causal;
      const testing::PathComparison cmp = testing::compare_paths(c, KernelPath::kSm80);
      const double bound = v.dtype == DType::kFloat32   ? 1e-5
                           : v.dtype == DType::kFloat16 ? 8.0 / 2048
                                                        : 8.0 / 256;
      EXPECT_TRUE(cmp.status.ok() && cmp.reference_status.ok() && cmp.unwritten_o == 0 &&
                  cmp.error.finite_ok() && cmp.error.rel_fro <= bound)
          << c.describe() << "\n" << cmp.describe();
    }
  }
}

// fp32 d192 / d256 run as two half-V launches of one kernel (src/sm80/launch.cu): each half must
// match the fp64 reference, every element of O must be written and LSE comes from the first launch
// (check_path compares LSE too). Causal and not, Sq == Sk and Sq < Sk, tails past the 64 x 32 tile.
// Small enough for compute-sanitizer.
TEST(Sm80Fp32SplitV, WideHeadDimsMatchFp64Reference) {
  FC_REQUIRE_SM(80);
  for (int d : {192, 256}) {
    const Variant v{d, d, DType::kFloat32};
    if (!variant_unavailable(v).empty()) continue;  // pruned build (the sweep says why)
    for (bool causal : {false, true}) {
      for (int sq : {300, 65}) {
        TestCase c = case_for(v, uint64_t(d + sq + causal));
        c.heads_q = 2;
        c.seqlen_q = sq;
        c.seqlen_k = 300;
        c.causal = causal;
        c.input_scale = causal ? 10.0f : 1.0f;
        expect_sm80_matches(c);
      }
    }
  }
}

// Small shapes for compute-sanitizer (memcheck / racecheck): tails, causal, window, ALiBi, varlen,
// on both K/V pipelines of the tuning table (single-buffered d64, d128 and 192/128; two-stage
// 64/128, the Dqk < Dv pair, and both fp32 (3xTF32) tiles).
TEST(Sm80Sanitizer, SmallShapesEveryFeature) {
  FC_REQUIRE_SM(80);
  for (Variant v : {Variant{64, 64, DType::kFloat16}, Variant{128, 128, DType::kBFloat16},
                    Variant{192, 128, DType::kFloat16}, Variant{64, 128, DType::kBFloat16},
                    Variant{64, 64, DType::kFloat32}, Variant{128, 128, DType::kFloat32}}) {
    if (!variant_unavailable(v).empty()) continue;
    std::mt19937 rng(9);
    for (MaskMode m : {MaskMode::kNone, MaskMode::kCausalBottomRight, MaskMode::kWindow, MaskMode::kAlibi}) {
      TestCase c = case_for(v, 9u);
      c.heads_q = 2;
      c.seqlen_q = 65;
      c.seqlen_k = 97;
      apply_mode(c, m, rng);
      expect_sm80_matches(c);
    }
    TestCase vl = case_for(v, 10u);
    vl.causal = true;
    vl.batch = 2;
    vl.varlen_q = {5, 70};
    vl.varlen_k = {33, 66};
    vl.seqused_k = {20, 66};
    expect_sm80_matches(vl);
  }
}

// supports() names the reason: pruned head dims (and fp32 192/128, never instantiated) are "not in
// this build"; fp32 d256 is accepted exactly when its half-V kernel 256/128 is built; old
// architectures, misaligned strides and host pointers are refused by name.
TEST(Sm80Supports, SaysWhyNot) {
  if (flashcore::build_info().find(" sm80") == std::string::npos)
    GTEST_SKIP() << "the sm80 path is not part of this build (FLASHCORE_BUILD_SM80=OFF)";
  AttentionParams p;
  p.head_dim_qk = 128;
  p.head_dim_v = 128;
  p.dtype = DType::kFloat32;
  detail::DeviceInfo info;
  info.has_device = true;
  info.cc_major = 9;
  info.cc_minor = 0;
  info.max_smem_per_block_optin = 227 * 1024;
  p.head_dim_qk = 256;
  const bool half_v_built = detail::sm80_path().supports(p, info).empty();  // the 256/128 fp32 unit
  p.head_dim_qk = 192;  // fp32 192/128: padded to 256/128
  EXPECT_EQ(detail::sm80_path().supports(p, info).empty(), half_v_built) << detail::sm80_path().supports(p, info);
  p.head_dim_qk = 256;
  p.head_dim_v = 256;
  if (half_v_built) {
    EXPECT_EQ(detail::sm80_path().supports(p, info), "");
  } else {
    EXPECT_NE(detail::sm80_path().supports(p, info).find("in parts of Dv"), std::string::npos);
  }
  p.head_dim_qk = p.head_dim_v = 128;
  if (detail::sm80_path().supports(p, info).empty()) {  // fp32 d128 is in this build
    p.q_seq_stride = 132;  // 16-byte multiples are 4 fp32 elements (8 for 16-bit dtypes)
    EXPECT_EQ(detail::sm80_path().supports(p, info), "");
    p.q_seq_stride = 130;
    EXPECT_NE(detail::sm80_path().supports(p, info).find("q: the sm80 path needs"), std::string::npos);
    p.q_seq_stride = 0;
  }
  p.dtype = DType::kFloat16;
  p.head_dim_qk = p.head_dim_v = 100;  // not a multiple of 8: no padding, and no pair of its own
  EXPECT_NE(detail::sm80_path().supports(p, info).find("not in this build"), std::string::npos);
  p.head_dim_qk = p.head_dim_v = 128;
  info.cc_major = 7;
  info.cc_minor = 5;
  EXPECT_NE(detail::sm80_path().supports(p, info).find("compute capability >= 8.0"), std::string::npos);
  info.cc_major = 9;
  info.cc_minor = 0;
  if (detail::sm80_path().supports(p, info).empty()) {  // d128 fp16 for sm_90 is in this build
    p.q_seq_stride = 100;
    EXPECT_NE(detail::sm80_path().supports(p, info).find("q: the sm80 path needs"), std::string::npos);
  }
  info.has_device = false;
  EXPECT_NE(detail::sm80_path().supports(p, info).find("needs a CUDA device"), std::string::npos);
}

}  // namespace
}  // namespace flashcore
