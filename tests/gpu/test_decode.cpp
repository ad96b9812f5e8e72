// The decode (split-KV) path against the fp64 CPU reference (tests/common/gpu_check): one and four
// query tokens over dense, paged (page sizes 1..256, shuffled pools), batch-indexed and left-padded
// caches, GQA 1/4/8, every mask and score mode, split counts forced from 1 to many and chosen by the
// plan, varlen prefill over a paged cache. Cache slots that hold no key are NaN (make_problem), so a
// read outside the keys fails; outputs are NaN-poisoned and must be overwritten everywhere.
#include <algorithm>
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
using testing::TestCase;

struct Variant {
  int d;
  DType dtype;
};
std::vector<Variant> all_variants() {
  std::vector<Variant> out;
  for (int d : {64, 96, 128, 256})
    for (DType dt : {DType::kFloat16, DType::kBFloat16}) out.push_back({d, dt});
  // Head dims without a decode kernel of their own, padded to the covering one (api/built_kernels.hpp):
  // 80 -> 96, 160 -> 256, 40 -> 64, 200 -> 256 (zeros past the call's columns, o written in its own).
  for (int d : {80, 160})
    for (DType dt : {DType::kFloat16, DType::kBFloat16}) out.push_back({d, dt});
  out.push_back({40, DType::kBFloat16});
  out.push_back({200, DType::kFloat16});
  return out;
}
std::string variant_name(const ::testing::TestParamInfo<Variant>& info) {
  return "d" + std::to_string(info.param.d) + "_" + dtype_name(info.param.dtype);
}

// Empty when this build and device run the variant on the decode path, otherwise why not.
std::string variant_unavailable(const Variant& v) {
  AttentionParams p;
  p.head_dim_qk = p.head_dim_v = v.d;
  p.dtype = v.dtype;
  p.batch = p.heads_q = p.heads_kv = p.seqlen_q = 1;
  detail::DeviceInfo info;
  info.has_device = true;
  const int cc = testing::gpu_compute_capability();
  info.cc_major = cc / 10;
  info.cc_minor = cc % 10;
  int dev = 0, optin = 0;
  cudaGetDevice(&dev);
  cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev);
  info.max_smem_per_block_optin = size_t(optin);
  return detail::decode_path().supports(p, info);
}

#define FC_REQUIRE_DECODE_VARIANT(v)                 \
  do {                                               \
    FC_REQUIRE_SM(80);                               \
    const std::string why_ = variant_unavailable(v); \
    if (!why_.empty()) GTEST_SKIP() << why_;         \
  } while (0)

TestCase decode_case(const Variant& v, uint64_t seed) {
  TestCase c;
  c.head_dim_qk = c.head_dim_v = v.d;
  c.dtype = v.dtype;
  c.seed = seed;
  return c;
}

void expect_decode_matches(const TestCase& c) { FC_EXPECT_PATH_MATCHES_REFERENCE(c, KernelPath::kDecode); }

class DecodeSweep : public ::testing::TestWithParam<Variant> {};

// One and four query tokens, GQA 8 / 4 / 1, dense cache, every mask and score mode, lengths that are
// not block multiples, and the split count forced to 1, 3 and 64 or chosen by the plan.
TEST_P(DecodeSweep, DenseCacheMatchesFp64Reference) {
  const Variant v = GetParam();
  FC_REQUIRE_DECODE_VARIANT(v);
  std::mt19937 rng(uint32_t(v.d * 131 + int(v.dtype)));
  int index = 0;
  for (int seqlen_q : {1, 4}) {
    for (int mode = 0; mode < 6; ++mode, ++index) {
      TestCase c = decode_case(v, 300u + uint64_t(index));
      c.batch = 2;
      c.seqlen_q = seqlen_q;
      c.seqlen_k = std::vector<int>{1, 63, 1000, 4099, 257, 2048}[size_t(index % 6)];
      c.heads_kv = 2;
      c.heads_q = c.heads_kv * std::vector<int>{8, 4, 1}[size_t(index % 3)];
      c.num_splits = std::vector<int>{0, 1, 3, 64}[size_t(index % 4)];
      c.input_scale = index % 2 == 0 ? 1.0f : 10.0f;
      if (mode == 1) c.causal = true;
      if (mode == 2) c.window_left = int(rng() % 300), c.window_right = 0;
      if (mode == 3) c.softcap = 2.5f;
      if (mode == 4) c.alibi = AlibiLayout::kPerBatchHead;
      if (mode == 5) c.causal = true, c.align = MaskAlign::kTopLeft;
      expect_decode_matches(c);
    }
  }
}

// Paged caches (page sizes 1, 16, 64, 256 and odd 48 and 100: small pages and, from 64 rows, the
// large pages' tiles) with per-entry lengths (seqused_k = the cache lengths), GQA 8, one and four
// tokens, causal, forced and planned splits.
TEST_P(DecodeSweep, PagedCacheMatchesFp64Reference) {
  const Variant v = GetParam();
  FC_REQUIRE_DECODE_VARIANT(v);
  int index = 0;
  for (int page_size : {1, 16, 48, 64, 100, 256}) {
    for (int seqlen_q : {1, 4}) {
      TestCase c = decode_case(v, 500u + uint64_t(index));
      c.batch = 3;
      c.seqlen_q = seqlen_q;
      c.seqlen_k = page_size == 1 ? 300 : 1500;
      c.seqused_k = {c.seqlen_k, 1, c.seqlen_k / 2 + 3};
      c.heads_kv = 2;
      c.heads_q = 16;
      c.page_size = page_size;
      c.causal = index % 2 == 0;
      c.num_splits = std::vector<int>{0, 1, 5}[size_t(index % 3)];
      expect_decode_matches(c);
      ++index;
    }
  }
}

// A dense cache read through a batch index, left padding (alone and with small and large pages),
// ALiBi and windows counted from the padded start.
TEST_P(DecodeSweep, BatchIndexAndLeftPaddingMatchFp64Reference) {
  const Variant v = GetParam();
  FC_REQUIRE_DECODE_VARIANT(v);
  for (int variant = 0; variant < 5; ++variant) {
    TestCase c = decode_case(v, 700u + uint64_t(variant));
    c.batch = 3;
    c.seqlen_q = variant == 3 ? 4 : 1;
    c.seqlen_k = 777;
    c.heads_kv = 1;
    c.heads_q = 8;
    c.seqused_k = {777, 500, 20};
    if (variant == 0) c.kv_batch_index = true;
    if (variant >= 1) c.leftpad_k = {0, 123, 19};
    if (variant == 1) c.kv_batch_index = true, c.alibi = AlibiLayout::kPerHead;
    if (variant == 2) c.page_size = 16, c.causal = true, c.window_left = 100;
    if (variant == 3) c.page_size = 64, c.causal = true, c.num_splits = 4;
    if (variant == 4) c.page_size = 128, c.num_splits = 3;  // one token: the large pages' tile
    expect_decode_matches(c);
  }
}

// Prefill over a paged cache: varlen queries (one sequence empty) against paged keys, causal.
TEST_P(DecodeSweep, VarlenPrefillOverPagedCacheMatchesFp64Reference) {
  const Variant v = GetParam();
  FC_REQUIRE_DECODE_VARIANT(v);
  for (int page_size : {16, 256}) {
    TestCase c = decode_case(v, 900u + uint64_t(page_size));
    c.heads_kv = 2;
    c.heads_q = 4;
    c.varlen_q = {1, 130, 0, 37};
    c.varlen_k = {63, 400, 5, 37};
    c.batch = 4;
    c.page_size = page_size;
    c.causal = true;
    expect_decode_matches(c);
  }
}

INSTANTIATE_TEST_SUITE_P(AllHeadDims, DecodeSweep, ::testing::ValuesIn(all_variants()), variant_name);

// Automatic dispatch: a decode-shaped call goes to the decode path; a prefill-shaped dense call does
// not; a prefill-shaped paged call goes to the sm90 path where that path takes it, else to decode.
TEST(DecodeDispatch, AutoPicksDecodeForDecodeShapesAndPagedCalls) {
  FC_REQUIRE_SM(80);
  const Variant v{128, DType::kBFloat16};
  if (!variant_unavailable(v).empty()) GTEST_SKIP() << variant_unavailable(v);
  for (int variant = 0; variant < 3; ++variant) {
    TestCase c = decode_case(v, 11u);
    c.batch = 2;
    c.heads_q = 8;
    c.heads_kv = 1;
    c.seqlen_q = variant == 1 ? 512 : 1;
    c.seqlen_k = 600;
    if (variant == 2) c.seqlen_q = 512, c.page_size = 64;
    testing::HostProblem host = testing::make_problem(c);
    testing::DeviceProblem device(host);
    KernelPath chosen = KernelPath::kAuto;
    ASSERT_TRUE(select_path(device.params, &chosen).ok());
    if (variant == 1) {
      EXPECT_NE(chosen, KernelPath::kDecode) << c.describe();
    } else if (variant == 2 && supports(device.params, KernelPath::kSm90).supported) {
      EXPECT_EQ(chosen, KernelPath::kSm90) << c.describe();
    } else {
      EXPECT_EQ(chosen, KernelPath::kDecode) << c.describe();
    }
  }
}

// The rule behind the dispatch above, without a device (an H100 as supports() sees it): the decode
// path supports a prefill-shaped paged call but defers it to sm90 under automatic dispatch while
// sm90 takes it; not a decode-shaped one, nor one sm90 refuses (pages of 12 rows), nor dense or
// batch-indexed K/V.
TEST(DecodeDispatch, DefersPrefillShapedPagedCallsToSm90WithoutADevice) {
  detail::DeviceInfo info;
  info.has_device = true, info.cc_major = 9, info.cc_minor = 0, info.sm_count = 132;
  info.max_smem_per_block_optin = 227 * 1024;
  alignas(16) static int32_t table[2 * 4] = {0, 1, 2, 3, 4, 5, 6, 7};
  AttentionParams p;
  p.batch = 2, p.seqlen_q = 512, p.seqlen_k = 256, p.heads_q = 8, p.heads_kv = 2;
  p.head_dim_qk = p.head_dim_v = 128, p.dtype = DType::kBFloat16;
  p.q = p.k = p.v = p.o = reinterpret_cast<void*>(uintptr_t(1) << 20);
  set_dense_strides(p);
  p.block_table = table, p.block_table_batch_stride = 4, p.pages_per_seq = 4, p.page_size = 64, p.num_pages = 8;
  p.k_batch_stride = p.v_batch_stride = int64_t(p.page_size) * p.k_seq_stride;
  const detail::PathOps decode = detail::decode_path();
  const std::string sm90_why = detail::sm90_path().supports(p, info);
  if (!sm90_why.empty()) GTEST_SKIP() << "the sm90 path does not take this call in this build: " << sm90_why;
  const std::string decode_why = decode.supports(p, info);
  if (!decode_why.empty()) GTEST_SKIP() << "the decode path is not in this build: " << decode_why;
  ASSERT_NE(decode.defers, nullptr);
  EXPECT_NE(decode.defers(p, info).find("prefill-shaped paged call"), std::string::npos) << decode.defers(p, info);
  AttentionParams x = p;
  x.seqlen_q = 8;  // 32 packed rows per KV head: decode-shaped
  EXPECT_EQ(decode.defers(x, info), "");
  x = p, x.page_size = 12, x.pages_per_seq = 22, x.k_batch_stride = x.v_batch_stride = 12 * p.k_seq_stride;
  EXPECT_EQ(decode.defers(x, info), "");  // sm90 refuses pages of 12 rows: the decode path keeps the call
  x = p, x.block_table = nullptr;
  set_dense_strides(x);
  EXPECT_EQ(decode.defers(x, info), "");  // dense K/V: the decode path does not take it in the first place
}

// 32k-token caches (too long for the CPU reference), GQA 8, against the naive GPU reference, with
// the plan's split count and a forced large one. Bound: a few units of the dtype's rounding.
TEST(DecodeLargeShapes, MatchNaiveGpuReference) {
  FC_REQUIRE_SM(80);
  for (Variant v : {Variant{128, DType::kBFloat16}, Variant{64, DType::kFloat16}}) {
    if (!variant_unavailable(v).empty()) continue;
    for (int splits : {0, 100}) {
      TestCase c = decode_case(v, 32768u + uint64_t(splits));
      c.batch = 1;
      c.heads_q = 16;
      c.heads_kv = 2;
      c.seqlen_q = 1;
      c.seqlen_k = 32771;
      c.num_splits = splits;
      const testing::PathComparison cmp = testing::compare_paths(c, KernelPath::kDecode);
      const double bound = v.dtype == DType::kFloat16 ? 8.0 / 2048 : 8.0 / 256;
      EXPECT_TRUE(cmp.status.ok() && cmp.reference_status.ok() && cmp.unwritten_o == 0 &&
                  cmp.error.finite_ok() && cmp.error.rel_fro <= bound)
          << c.describe() << "\n" << cmp.describe();
    }
  }
}

}  // namespace
}  // namespace flashcore
