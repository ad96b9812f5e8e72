// The sm90 forward plan (src/sm90/fwd/plan.hpp) on the CPU: which kernel a call runs on, and the
// launch it gets (grid, head groups, pairing, stream-K tail, workspace). Every figure below follows
// from tile_config.hpp's table and the rules in plan.cpp; docs/design/sm90.md says why each rule.
#include <gtest/gtest.h>

#include "flashcore/flashcore.hpp"
#include "sm90/fwd/plan.hpp"

namespace {

using flashcore::AttentionParams;
using flashcore::DType;
using flashcore::ForwardOverrides;
using flashcore::StatusCode;
using flashcore::sm90::choose_forward_kernel;
using flashcore::sm90::DeviceFacts;
using flashcore::sm90::ForwardKernel;
using flashcore::sm90::ForwardPlan;
using flashcore::sm90::plan_forward;
using flashcore::sm90::Schedule;
using flashcore::sm90::TileShape;

// A dense [B, S, H, D] call (the plan reads sizes, mask and pointers' presence only).
AttentionParams call(int batch, int seqlen, int heads, int dim, bool causal = false) {
  static const char kData[16] = {};
  AttentionParams p;
  p.q = p.k = p.v = kData;
  p.batch = batch;
  p.seqlen_q = p.seqlen_k = seqlen;
  p.heads_q = p.heads_kv = heads;
  p.head_dim_qk = p.head_dim_v = dim;
  p.dtype = DType::kFloat16;
  p.causal = causal;
  return p;
}

ForwardKernel kernel_of(const AttentionParams& p, const ForwardOverrides& o = {}) {
  ForwardKernel k;
  const flashcore::Status st = choose_forward_kernel(p, p.head_dim_qk, p.head_dim_v, o, &k);
  EXPECT_TRUE(st.ok()) << st.message;
  return k;
}

ForwardPlan plan_of(const AttentionParams& p, const ForwardOverrides& o = {}, int resident_units = 132) {
  ForwardPlan plan;
  DeviceFacts device;
  device.sm_count = 132;
  device.resident_units = resident_units;
  const flashcore::Status st = plan_forward(p, kernel_of(p, o), device, o, &plan);
  EXPECT_TRUE(st.ok()) << st.message;
  return plan;
}

TEST(Sm90Plan, EveryDeclaredPairHasATileConfiguration) {
  for (const auto& [dqk, dv] : {std::pair{64, 64}, {96, 96}, {128, 128}, {192, 128}, {256, 256}}) {
    EXPECT_TRUE(flashcore::sm90::tile_facts(dqk, dv).found) << dqk << "/" << dv;
  }
  EXPECT_FALSE(flashcore::sm90::tile_facts(72, 72).found);
  EXPECT_FALSE(flashcore::sm90::tile_facts(128, 128, TileShape::kShort).found);  // d128 has no short shape
  ForwardKernel k;
  EXPECT_EQ(choose_forward_kernel(call(1, 128, 1, 72), 72, 72, {}, &k).code, StatusCode::kUnsupported);
  // A kernel narrower than the call is a caller's bug, never a silent truncation.
  EXPECT_EQ(choose_forward_kernel(call(1, 128, 1, 128), 96, 96, {}, &k).code, StatusCode::kInternal);
}

// A call padded to a larger kernel (head dim 112 on d128's): the kernel's head dims are recorded for
// the launcher, and the cluster kernel (whole 5-D boxes multicast) is never chosen, though the same
// call at d128 runs on clusters.
TEST(Sm90Plan, PaddedCallsRunTheCoveringKernelWithoutClusters) {
  ForwardKernel own, padded;
  ASSERT_TRUE(choose_forward_kernel(call(4, 16384, 32, 128), 128, 128, {}, &own).ok());
  ASSERT_TRUE(choose_forward_kernel(call(4, 16384, 32, 112), 128, 128, {}, &padded).ok());
  EXPECT_EQ(own.cluster_m, 2);
  EXPECT_EQ(padded.cluster_m, 1);
  EXPECT_EQ(padded.head_dim_qk, 128);
  EXPECT_EQ(padded.head_dim_v, 128);
  EXPECT_TRUE(padded.all_keys_visible);
  ForwardPlan plan;
  ASSERT_TRUE(plan_forward(call(4, 16384, 32, 112), padded, DeviceFacts{132, 132}, {}, &plan).ok());
  EXPECT_EQ(plan.kernel.head_dim_v, 128);
}

TEST(Sm90Plan, LongDenseD128RunsTheLongShapeOnClusters) {
  const ForwardPlan plan = plan_of(call(4, 16384, 32, 128));
  EXPECT_EQ(plan.kernel.shape, TileShape::kLong);
  EXPECT_TRUE(plan.kernel.all_keys_visible);
  EXPECT_EQ(plan.kernel.cluster_m, 2);
  EXPECT_EQ(plan.kernel.block_n, 80);
  EXPECT_EQ(plan.block_m, 192);
  EXPECT_EQ(plan.num_m_blocks, 86);  // ceil(16384 / 192)
  EXPECT_EQ(plan.m_row_shift, 0);    // the short block goes first only in the masked kernel
  EXPECT_EQ(plan.heads_per_group, 1);  // equal tiles: head after head
  EXPECT_FALSE(plan.pair_tiles);
  EXPECT_EQ(plan.num_units, 43 * 128);  // pairs of query blocks
  EXPECT_EQ(plan.grid_ctas(), 264);
}

TEST(Sm90Plan, LongCausalD128PutsTheShortQueryBlockFirst) {
  const ForwardPlan plan = plan_of(call(4, 16384, 32, 128, /*causal=*/true));
  EXPECT_EQ(plan.kernel.shape, TileShape::kLong);
  EXPECT_FALSE(plan.kernel.all_keys_visible);
  EXPECT_EQ(plan.kernel.cluster_m, 1);
  EXPECT_EQ(plan.m_row_shift, 86 * 192 - 16384);
  EXPECT_GT(plan.heads_per_group, 1);  // uneven tiles: heads interleave for L2
  EXPECT_FALSE(plan.tail.active());    // stream-K only for equal tiles
}

TEST(Sm90Plan, ShortCallsKeepTheDefaultShapeWithoutCluster) {
  const ForwardPlan plan = plan_of(call(4, 1024, 32, 128));
  EXPECT_EQ(plan.kernel.shape, TileShape::kDefault);
  EXPECT_EQ(plan.kernel.cluster_m, 1);  // below kClusterMinSeqlenK
  EXPECT_EQ(plan.kernel.block_n, 128);
  EXPECT_EQ(plan.num_units, 8 * 128);
  // 1024 tiles on 132 SMs leave a last wave of 100: the tail would save 1.9 blocks per CTA, fewer
  // than kStreamKMinSavedBlocks.
  EXPECT_FALSE(plan.tail.active());
  EXPECT_EQ(plan.workspace_bytes, 0u);
}

TEST(Sm90Plan, ShortMaskedD64CallsTakeTheShortShape) {
  EXPECT_EQ(kernel_of(call(16, 1024, 32, 64, true)).shape, TileShape::kShort);
  EXPECT_EQ(kernel_of(call(2, 8192, 32, 64, true)).shape, TileShape::kDefault);
  EXPECT_EQ(kernel_of(call(16, 1024, 32, 64, false)).shape, TileShape::kDefault);  // not masked
}

TEST(Sm90Plan, ALeftWindowEdgeKeepsTheDefaultShape) {
  AttentionParams p = call(1, 16384, 8, 128, true);
  p.window_left = 1024;
  const ForwardKernel k = kernel_of(p);
  EXPECT_EQ(k.shape, TileShape::kDefault);
  EXPECT_FALSE(k.all_keys_visible);
  EXPECT_FALSE(plan_of(p).pair_tiles);  // window tiles are about equally long: no pairs
}

TEST(Sm90Plan, VarlenRunsTheVarlenKernelWithItsCounter) {
  static const int32_t kCu[3] = {0, 100, 300};
  AttentionParams p = call(2, 200, 4, 128, true);
  p.cu_seqlens_q = p.cu_seqlens_k = kCu;
  p.total_q = p.total_k = 300;
  const ForwardPlan plan = plan_of(p);
  EXPECT_TRUE(plan.kernel.varlen);
  EXPECT_EQ(plan.kernel.block_n, 128);
  EXPECT_FALSE(plan.pair_tiles);
  EXPECT_EQ(plan.workspace_bytes, sizeof(int));
  EXPECT_EQ(plan.workspace_zeroed_bytes, sizeof(int));
}

// ALiBi calls run on the kernels built with the bias: the default shape's masked kernel (even where
// every row sees every key, and on the long d128 call that would take clusters) or the varlen one.
// Paged calls take the varlen kernel too.
TEST(Sm90Plan, AlibiAndPagedCallsRunTheirOwnKernels) {
  static const float kSlopes[4] = {};
  AttentionParams p = call(4, 16384, 4, 128);
  p.alibi_slopes = kSlopes;
  const ForwardKernel dense = kernel_of(p);
  EXPECT_TRUE(dense.alibi);
  EXPECT_FALSE(dense.all_keys_visible);
  EXPECT_FALSE(dense.varlen);
  EXPECT_EQ(dense.cluster_m, 1);
  EXPECT_EQ(dense.shape, TileShape::kDefault);
  EXPECT_NE(flashcore::sm90::describe(dense).find("alibi"), std::string::npos);
  static const int32_t kCu[3] = {0, 100, 300};
  p.cu_seqlens_q = p.cu_seqlens_k = kCu;
  p.batch = 2, p.total_q = p.total_k = 300;
  const ForwardKernel varlen = kernel_of(p);
  EXPECT_TRUE(varlen.alibi && varlen.varlen);
  static const int32_t kTable[2] = {0, 1};
  AttentionParams paged = call(2, 256, 4, 128, true);
  paged.block_table = kTable, paged.block_table_batch_stride = 1, paged.pages_per_seq = 1;
  paged.page_size = 256, paged.num_pages = 2;
  const ForwardKernel k = kernel_of(paged);
  EXPECT_TRUE(k.varlen);
  EXPECT_FALSE(k.alibi);
}

// Row-group K/V tiles (kernel_traits.cuh, kKvRowGroups): paged calls over a pool of evenly spaced rows
// with unpadded head dims of more than one 64-column chunk; the other paged calls keep the chunked
// tiles, as every call without pages does.
TEST(Sm90Plan, PagedCallsTakeRowGroupTilesWhereThePoolAllows) {
  static const int32_t kTable[4] = {0, 1, 2, 3};
  auto paged = [](int dim, int page_size) {
    AttentionParams p = call(2, 2 * page_size, 4, dim, true);
    p.heads_kv = 2;
    flashcore::set_dense_strides(p);
    p.block_table = kTable, p.block_table_batch_stride = 2, p.pages_per_seq = 2;
    p.page_size = page_size, p.num_pages = 4;
    p.k_batch_stride = int64_t(page_size) * p.k_seq_stride;
    p.v_batch_stride = int64_t(page_size) * p.v_seq_stride;
    return p;
  };
  for (int page_size : {8, 16, 48, 256}) {
    const ForwardKernel k = kernel_of(paged(128, page_size));
    EXPECT_TRUE(k.varlen && k.kv_row_groups) << page_size;
    EXPECT_NE(flashcore::sm90::describe(k).find("kv-row-groups"), std::string::npos);
  }
  EXPECT_FALSE(kernel_of(paged(64, 16)).kv_row_groups) << "one chunk: the same layout either way";
  AttentionParams split_pool = paged(128, 16);  // K and V pages interleaved in one buffer
  split_pool.k_batch_stride *= 2;
  EXPECT_FALSE(kernel_of(split_pool).kv_row_groups);
  split_pool = paged(128, 16);
  split_pool.v_batch_stride += 8;
  EXPECT_FALSE(kernel_of(split_pool).kv_row_groups);
  AttentionParams padded = paged(96, 16);  // on the d128 kernel
  ForwardKernel k;
  ASSERT_TRUE(choose_forward_kernel(padded, 128, 128, ForwardOverrides{}, &k).ok());
  EXPECT_TRUE(k.varlen);
  EXPECT_FALSE(k.kv_row_groups);
  static const float kSlopes[4] = {};
  AttentionParams alibi = paged(128, 16);
  alibi.alibi_slopes = kSlopes;
  EXPECT_FALSE(kernel_of(alibi).kv_row_groups);
  static const int32_t kCu[3] = {0, 100, 300};
  AttentionParams varlen = call(2, 200, 4, 128);
  varlen.cu_seqlens_q = varlen.cu_seqlens_k = kCu;
  varlen.total_q = varlen.total_k = 300;
  EXPECT_FALSE(kernel_of(varlen).kv_row_groups);
}

TEST(Sm90Plan, ForcedStreamKTailSizesItsWorkspace) {
  ForwardOverrides o;
  o.max_grid_units = 5;
  o.stream_k = 1;
  AttentionParams p = call(1, 300, 4, 128);
  p.seqlen_k = 700;
  const ForwardPlan plan = plan_of(p, o);
  EXPECT_EQ(plan.grid_units, 5);
  EXPECT_EQ(plan.num_units, 12);  // 3 query blocks x 4 heads
  ASSERT_TRUE(plan.tail.active());
  EXPECT_EQ(plan.tail.blocks_per_unit, 6);  // ceil(700 / 128)
  // Flags: 5 CTAs x 2 warpgroups, rounded to 256 bytes; partials: (Dv/2 + 4) floats x 128 threads
  // per warpgroup and CTA.
  EXPECT_EQ(plan.workspace_zeroed_bytes, 256u);
  EXPECT_EQ(plan.workspace_bytes, 256u + 5u * 2 * 128 * (64 + 4) * sizeof(float));
  o.stream_k = 0;
  EXPECT_FALSE(plan_of(p, o).tail.active());
}

TEST(Sm90Plan, OverridesForceOrRefuseTheirChoice) {
  ForwardOverrides o;
  o.cluster = 0;
  EXPECT_EQ(kernel_of(call(4, 16384, 32, 128), o).cluster_m, 1);
  o = {};
  o.cluster = 1;
  EXPECT_EQ(kernel_of(call(4, 2048, 32, 128), o).cluster_m, 2);  // 16 query blocks pair up
  o = {};
  o.long_tiles = 0;
  EXPECT_EQ(kernel_of(call(4, 16384, 32, 128), o).shape, TileShape::kDefault);
  o = {};
  o.heads_per_group = 3;
  o.pair_tiles = 1;
  const ForwardPlan plan = plan_of(call(2, 2048, 8, 128, true), o);
  EXPECT_EQ(plan.heads_per_group, 3);
  EXPECT_TRUE(plan.pair_tiles);
  o = {};
  o.always_rescale = 1;
  EXPECT_TRUE(plan_of(call(1, 1024, 4, 128), o).always_rescale_o);
  o = {};
  o.block_n = 96;  // not d128's kBlockN nor its kAltBlockN
  ForwardKernel k;
  EXPECT_EQ(choose_forward_kernel(call(1, 1024, 4, 128), 128, 128, o, &k).code, StatusCode::kUnsupported);
}

TEST(Sm90Plan, TuningKernelsAreNamedAndNeedTheirBuildOption) {
  ForwardOverrides o;
  o.schedule = 0;
  ForwardKernel k;
  const flashcore::Status st = choose_forward_kernel(call(1, 1024, 4, 128), 128, 128, o, &k);
  EXPECT_EQ(k.schedule, Schedule::kSerial);
  EXPECT_TRUE(k.tuning_only);
#if defined(FLASHCORE_TUNING_KERNELS)
  EXPECT_TRUE(st.ok());
#else
  EXPECT_EQ(st.code, StatusCode::kUnsupported);
  EXPECT_NE(st.message.find("FLASHCORE_BUILD_TUNING_KERNELS"), std::string::npos) << st.message;
#endif
}

TEST(Sm90Plan, MoreThan2To31TilesIsUnsupported) {
  AttentionParams p = call(65535, 1 << 20, 65535, 64);
  ForwardPlan plan;
  const flashcore::Status st = plan_forward(p, kernel_of(p), DeviceFacts{132, 132}, {}, &plan);
  EXPECT_EQ(st.code, StatusCode::kUnsupported);
}

}  // namespace
