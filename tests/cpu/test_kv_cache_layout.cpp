// KV-cache layouts on the CPU: the fp64 reference computes the same attention from a paged,
// batch-indexed or left-padded cache as from the dense keys they hold (bitwise: the same doubles in
// the same order); validate() rejects malformed block tables, batch indices and left padding by
// name; the decode plan's split-KV rule.
#include <cstring>
#include <vector>

#include <gtest/gtest.h>

#include "common/tensor_util.hpp"
#include "flashcore/flashcore.hpp"
#include "reference/cpu_reference.hpp"
#include "sm80/decode/plan.hpp"

namespace flashcore {
namespace {

using testing::TestCase;

std::vector<double> reference_out(const AttentionParams& p) {
  std::vector<double> out, lse;
  reference::cpu_reference_forward_f64(p, &out, &lse);
  out.insert(out.end(), lse.begin(), lse.end());
  return out;
}

TestCase base_case() {
  TestCase c;
  c.batch = 3;
  c.seqlen_q = 4;
  c.seqlen_k = 203;
  c.heads_q = 8;
  c.heads_kv = 2;
  c.head_dim_qk = c.head_dim_v = 32;
  c.causal = true;
  c.seqused_k = {203, 1, 100};
  return c;
}

TEST(KvCacheLayout, PagedAndIndexedCachesEqualTheDenseKeys) {
  const TestCase dense_case = base_case();
  const testing::HostProblem dense = testing::make_problem(dense_case);
  const std::vector<double> expected = reference_out(dense.params);
  for (int variant = 0; variant < 4; ++variant) {
    TestCase c = dense_case;
    if (variant == 0) c.page_size = 16;
    if (variant == 1) c.page_size = 7;
    if (variant == 2) c.page_size = 256;
    if (variant == 3) c.kv_batch_index = true;
    const testing::HostProblem cached = testing::make_problem(c);
    EXPECT_TRUE(validate(cached.params).ok()) << validate(cached.params).message;
    EXPECT_EQ(reference_out(cached.params), expected) << c.describe();
  }
}

// Left padding: the keys are cache rows [leftpad, end), counted from leftpad. The same attention
// is a dense call over those rows (seqused_k = end - leftpad, keys shifted down).
TEST(KvCacheLayout, LeftPaddingEqualsTheShiftedDenseKeys) {
  TestCase c = base_case();
  c.leftpad_k = {50, 0, 99};
  c.alibi = testing::AlibiLayout::kPerHead;
  const testing::HostProblem padded = testing::make_problem(c);
  ASSERT_TRUE(validate(padded.params).ok()) << validate(padded.params).message;
  const std::vector<double> got = reference_out(padded.params);

  TestCase shifted_case = base_case();
  shifted_case.alibi = testing::AlibiLayout::kPerHead;
  testing::HostProblem shifted = testing::make_problem(shifted_case);
  // Entry b's key j of the shifted problem is the padded problem's cache row leftpad[b] + j.
  const int elem = dtype_size(shifted.params.dtype);
  for (int b = 0; b < 3; ++b) {
    const int pad = c.leftpad_k[size_t(b)];
    shifted.seqused_k[size_t(b)] = c.seqused_k[size_t(b)] - pad;
    for (int j = 0; j + pad < c.seqused_k[size_t(b)]; ++j) {
      const int64_t src_k = b * padded.params.k_batch_stride + (j + pad) * padded.params.k_seq_stride;
      const int64_t dst_k = b * shifted.params.k_batch_stride + j * shifted.params.k_seq_stride;
      std::memcpy(&shifted.k[size_t(dst_k * elem)], &padded.k[size_t(src_k * elem)],
                  size_t(shifted.params.k_seq_stride * elem));
      const int64_t src_v = b * padded.params.v_batch_stride + (j + pad) * padded.params.v_seq_stride;
      const int64_t dst_v = b * shifted.params.v_batch_stride + j * shifted.params.v_seq_stride;
      std::memcpy(&shifted.v[size_t(dst_v * elem)], &padded.v[size_t(src_v * elem)],
                  size_t(shifted.params.v_seq_stride * elem));
    }
  }
  EXPECT_EQ(got, reference_out(shifted.params));
}

TEST(KvCacheLayout, ValidateNamesBadTablesIndicesAndPadding) {
  TestCase c = base_case();
  c.page_size = 16;
  testing::HostProblem paged = testing::make_problem(c);
  auto expect_error = [](const AttentionParams& p, const char* needle) {
    const Status st = validate(p);
    EXPECT_EQ(st.code, StatusCode::kInvalidArgument) << needle;
    EXPECT_NE(st.message.find(needle), std::string::npos) << st.message;
  };
  {
    AttentionParams p = paged.params;
    std::vector<int32_t> table = paged.block_table;
    table[1] = p.num_pages;  // entry 0's second page (rows 16..31 are used)
    p.block_table = table.data();
    expect_error(p, "block_table[0][1]");
    table[1] = -1;
    expect_error(p, "block_table[0][1]");
  }
  {
    AttentionParams p = paged.params;
    p.page_size = 0;
    expect_error(p, "page_size");
    p = paged.params;
    p.block_table_batch_stride = p.pages_per_seq - 1;
    expect_error(p, "block_table_batch_stride");
    p = paged.params;
    p.seqlen_k = p.pages_per_seq * p.page_size + 1;
    expect_error(p, "seqlen_k");
  }
  {
    // Unused table entries (past each entry's keys) may hold anything.
    AttentionParams p = paged.params;
    std::vector<int32_t> table = paged.block_table;
    table[size_t(p.block_table_batch_stride) + 5] = -7;  // entry 1 has one key: only slot 0 is read
    p.block_table = table.data();
    EXPECT_TRUE(validate(p).ok()) << validate(p).message;
  }
  TestCase ci = base_case();
  ci.kv_batch_index = true;
  testing::HostProblem indexed = testing::make_problem(ci);
  {
    AttentionParams p = indexed.params;
    std::vector<int32_t> idx = indexed.kv_batch_idx;
    idx[2] = p.kv_batch;
    p.kv_batch_idx = idx.data();
    expect_error(p, "kv_batch_idx[2]");
    p = indexed.params;
    p.kv_batch = 0;
    expect_error(p, "kv_batch");
  }
  {
    AttentionParams p = paged.params;
    p.kv_batch_idx = indexed.kv_batch_idx.data();
    p.kv_batch = 5;
    expect_error(p, "kv_batch_idx: not with a block_table");
  }
  {
    AttentionParams p = indexed.params;
    std::vector<int32_t> pad = {0, 2, 0};  // entry 1 has one key
    p.leftpad_k = pad.data();
    expect_error(p, "leftpad_k[1]");
    pad = {-1, 0, 0};
    expect_error(p, "leftpad_k[0]");
  }
  {
    TestCase cv;
    cv.varlen_q = {1, 2};
    cv.varlen_k = {3, 4};
    testing::HostProblem varlen = testing::make_problem(cv);
    AttentionParams p = varlen.params;
    std::vector<int32_t> pad = {0, 0};
    p.leftpad_k = pad.data();
    expect_error(p, "leftpad_k: not with varlen");
  }
}

// The split-KV rule: split until one wave of resident CTAs is full, never below kMinBlocksPerSplit
// KV blocks per split; an explicit num_splits is taken (capped by the KV blocks); the partials'
// workspace holds every split's O and LSE.
TEST(DecodePlan, SplitsFillOneWave) {
  AttentionParams p;
  p.batch = 1;
  p.heads_q = 64;
  p.heads_kv = 8;
  p.seqlen_q = 1;
  p.seqlen_k = 8192;
  p.head_dim_qk = p.head_dim_v = 128;
  // 8 units (B1 x 8 KV heads, one row tile) on 132 SMs x 2 CTAs: 33 splits of 128 / 33 blocks.
  sm80::DecodePlan plan = sm80::plan_decode(p, 32, 64, 264);
  EXPECT_EQ(plan.row_tiles, 1);
  EXPECT_EQ(plan.num_splits, 32);  // 128 blocks / kMinBlocksPerSplit = 32 caps 264 / 8 = 33
  EXPECT_EQ(plan.workspace_bytes, size_t(32) * 64 * 1 * (128 + 1) * sizeof(float));
  p.seqlen_k = 131072;
  EXPECT_EQ(sm80::plan_decode(p, 32, 64, 264).num_splits, 33);
  p.batch = 64;  // 512 units fill the GPU: no split
  plan = sm80::plan_decode(p, 32, 64, 264);
  EXPECT_EQ(plan.num_splits, 1);
  EXPECT_EQ(plan.workspace_bytes, 0u);
  p.batch = 8;  // 64 units: 4 splits fill 256 of 264 slots
  EXPECT_EQ(sm80::plan_decode(p, 32, 64, 264).num_splits, 4);
  p.num_splits = 1000;  // explicit: capped by kMaxSplits and the KV blocks
  EXPECT_EQ(sm80::plan_decode(p, 32, 64, 264).num_splits, sm80::kMaxSplits);
  p.seqlen_k = 100;
  EXPECT_EQ(sm80::plan_decode(p, 32, 64, 264).num_splits, 2);
  p.num_splits = 0;
  p.seqlen_q = 4;  // 4 tokens x 8 heads = 32 rows: still one row tile
  EXPECT_EQ(sm80::plan_decode(p, 32, 64, 264).row_tiles, 1);
  p.seqlen_q = 5;
  EXPECT_EQ(sm80::plan_decode(p, 32, 64, 264).row_tiles, 2);
}

}  // namespace
}  // namespace flashcore
