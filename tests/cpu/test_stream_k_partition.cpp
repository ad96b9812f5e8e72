// The stream-K tail's partition (src/attention/stream_k.hpp), the exact code the kernel walks: with the
// whole-tile waves before it, every KV block of every tile exactly once; a split tile's first part
// (in visit order) is written by CTA c as the first item of its share and merged by CTA c + 1 as
// the last item of its share; and the plan's rule for when a tail pays.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "attention/stream_k.hpp"

namespace {

using flashcore::attn::plan_stream_k_tail;
using flashcore::attn::StreamKItem;
using flashcore::attn::StreamKTail;
using flashcore::attn::TileRole;

TEST(Sm90StreamK, EveryBlockExactlyOnceAndSplitsPairUp) {
  for (const int grid : {1, 2, 3, 5, 7, 66, 132}) {
    for (const int units : {1, 2, 4, 6, 9, 13, 64, 135, 263, 1024, 4096}) {
      for (const int nb : {1, 2, 3, 8, 13, 103}) {
        const StreamKTail tail = plan_stream_k_tail(units, grid, nb, /*force=*/1);
        const std::string where =
            "grid " + std::to_string(grid) + " units " + std::to_string(units) + " nb " + std::to_string(nb);
        std::vector<int> seen((size_t)units * nb, 0);
        // The waves: units [0, first_unit), whole tiles (whole waves of them when a tail follows).
        if (tail.active()) ASSERT_EQ(tail.first_unit % grid, 0) << where;
        for (int u = 0; u < tail.first_unit; ++u) {
          for (int j = 0; j < nb; ++j) ++seen[(size_t)u * nb + j];
        }
        if (!tail.active()) {
          EXPECT_EQ(tail.first_unit, units) << where;
        } else {
          EXPECT_GT(units % grid, 0) << where;
          EXPECT_GT(units, grid) << where;
          EXPECT_EQ(units - tail.first_unit, grid + units % grid) << where;
        }
        // written[u]: the CTA that wrote unit u's partial; merged[u]: the CTA that merged it.
        std::vector<int> written(units, -1), merged(units, -1);
        for (int c = 0; c < grid; ++c) {
          const int n = tail.items(c);
          ASSERT_LE(n, flashcore::attn::kMaxStreamKItems) << where << " cta " << c;
          if (tail.active()) {
            EXPECT_GE(tail.share_begin(c + 1) - tail.share_begin(c), nb) << where << " cta " << c;
          }
          // What the kernel shell writes to shared memory: the same items, as KV block ranges.
          flashcore::attn::StreamKList list;
          list.fill(tail, c);
          ASSERT_EQ(list.count, n) << where;
          for (int k = 0; k < n; ++k) {
            const StreamKItem it = tail.item(c, k);
            EXPECT_EQ(list.work[k].unit, it.unit) << where;
            EXPECT_EQ(list.work[k].n_last, nb - 1 - it.j_begin) << where;
            EXPECT_EQ(list.work[k].n_first, nb - it.j_end) << where;
            EXPECT_EQ(list.work[k].role, it.role) << where;
          }
          for (int k = 0; k < n; ++k) {
            const StreamKItem it = tail.item(c, k);
            ASSERT_GE(it.unit, tail.first_unit) << where;
            ASSERT_LT(it.unit, units) << where;
            ASSERT_GE(it.j_begin, 0) << where;
            ASSERT_LT(it.j_begin, it.j_end) << where;
            ASSERT_LE(it.j_end, nb) << where;
            for (int j = it.j_begin; j < it.j_end; ++j) ++seen[(size_t)it.unit * nb + j];
            if (it.role == TileRole::kWritePartial) {
              EXPECT_EQ(k, 0) << where << ": a partial is the first item of a share";
              EXPECT_EQ(it.j_begin, 0) << where;
              EXPECT_LT(it.j_end, nb) << where;
              written[it.unit] = c;
            } else if (it.role == TileRole::kMergePartial) {
              EXPECT_EQ(k, n - 1) << where << ": a merge is the last item of a share";
              EXPECT_GT(it.j_begin, 0) << where;
              EXPECT_EQ(it.j_end, nb) << where;
              merged[it.unit] = c;
            } else {
              EXPECT_EQ(it.j_begin, 0) << where;
              EXPECT_EQ(it.j_end, nb) << where;
            }
          }
        }
        for (size_t i = 0; i < seen.size(); ++i) ASSERT_EQ(seen[i], 1) << where << " block " << i;
        for (int u = 0; u < units; ++u) {
          // A split tile: written by one CTA, merged by the next (which waits for the lower index).
          EXPECT_EQ(written[u] < 0, merged[u] < 0) << where << " unit " << u;
          if (written[u] >= 0) EXPECT_EQ(merged[u], written[u] + 1) << where << " unit " << u;
        }
      }
    }
  }
}

TEST(Sm90StreamK, PlanRule) {
  // No tail: tiles fill whole waves, fit one wave, or have a single block.
  EXPECT_FALSE(plan_stream_k_tail(264, 132, 8, -1).active());
  EXPECT_FALSE(plan_stream_k_tail(100, 132, 8, -1).active());
  EXPECT_FALSE(plan_stream_k_tail(133, 132, 1, 1).active());
  EXPECT_FALSE(plan_stream_k_tail(1000, 132, 8, 0).active());
  // d256 rows of the standard suite: 1024 tiles (7.76 waves), 103 KV blocks at S=8k.
  const StreamKTail d256 = plan_stream_k_tail(1024, 132, 103, -1);
  EXPECT_TRUE(d256.active());
  EXPECT_EQ(d256.first_unit, 6 * 132);
  // d128 S=1k: 4096 tiles of 8 blocks, 4 tiles past 31 waves: the tail saves ~8 blocks per CTA.
  EXPECT_TRUE(plan_stream_k_tail(4096, 132, 8, -1).active());
  // d256 S=1k: 1024 tiles of 13 blocks save 3 blocks per CTA, below kStreamKMinSavedBlocks.
  EXPECT_FALSE(plan_stream_k_tail(1024, 132, 13, -1).active());
  // A last wave that is nearly full saves less than kStreamKMinSavedBlocks per CTA: no tail.
  EXPECT_FALSE(plan_stream_k_tail(131 + 132 * 5, 132, 8, -1).active());
  EXPECT_TRUE(plan_stream_k_tail(131 + 132 * 5, 132, 8, 1).active());
}

}  // namespace
