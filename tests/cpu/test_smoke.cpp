// Smoke test of the build: enum names and dense strides.
#include <gtest/gtest.h>

#include "flashcore/flashcore.hpp"

TEST(Api, DenseStridesFollowFlashAttnLayout) {
  flashcore::AttentionParams p;
  p.batch = 2; p.seqlen_q = 5; p.seqlen_k = 7; p.heads_q = 4; p.heads_kv = 2;
  p.head_dim_qk = 64; p.head_dim_v = 32;
  flashcore::set_dense_strides(p);
  EXPECT_EQ(p.q_seq_stride, 4 * 64);
  EXPECT_EQ(p.q_batch_stride, 5 * 4 * 64);
  EXPECT_EQ(p.k_batch_stride, 7 * 2 * 64);
  EXPECT_EQ(p.v_seq_stride, 2 * 32);
  EXPECT_EQ(p.o_batch_stride, 5 * 4 * 32);
  EXPECT_EQ(p.lse_batch_stride, 4 * 5);
  EXPECT_EQ(p.lse_head_stride, 5);
}
