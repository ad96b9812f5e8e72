// The sm80 tuning tables' compact entries (src/sm80/common/smem_budget.hpp), without a device: every
// compact tile fits the 99 KB parts, an entry that fits them is its own compact tile (no second
// kernel is compiled for it), and a compact tile never holds more per thread than its entry (rows
// per warp and the dK / dV / O accumulators unchanged or fewer), so it cannot spill where the entry
// does not.
#include <string>

#include <gtest/gtest.h>

#include "sm80/bwd/tile_config.hpp"
#include "sm80/decode/tile_config.hpp"
#include "sm80/fwd/tile_config.hpp"

namespace flashcore::sm80 {
namespace {

TEST(CompactTileTables, ForwardCompactTilesFitAndKeepRowsPerWarp) {
  const int pairs[][2] = {{32, 32},   {64, 64},   {96, 96},   {128, 128}, {192, 192}, {256, 256}, {192, 128},
                          {128, 64},  {64, 128},  {256, 128}, {192, 96},  {512, 256}, {576, 256}};
  for (const auto& pr : pairs)
    for (int elem_bytes : {2, 4}) {
      SCOPED_TRACE(std::to_string(pr[0]) + "/" + std::to_string(pr[1]) + " x" + std::to_string(elem_bytes));
      const TileShape entry = tile_shape(pr[0], pr[1], elem_bytes);
      const TileShape compact = compact_tile_shape(pr[0], pr[1], elem_bytes);
      EXPECT_LE(smem_bytes(pr[0], pr[1], compact, elem_bytes), kCompactSmemBytes);
      if (smem_bytes(pr[0], pr[1], entry, elem_bytes) <= kCompactSmemBytes) EXPECT_TRUE(compact == entry);
      EXPECT_EQ(compact.block_m / compact.warps, entry.block_m / entry.warps);
      EXPECT_LE(compact.block_n, entry.block_n);
      EXPECT_TRUE(tile_shape_for(pr[0], pr[1], elem_bytes, 227 * 1024) == entry ||
                  smem_bytes(pr[0], pr[1], entry, elem_bytes) > 227 * 1024);
      EXPECT_TRUE(tile_shape_for(pr[0], pr[1], elem_bytes, kCompactSmemBytes) == compact);
    }
}

TEST(CompactTileTables, BackwardCompactTilesFitUpToD128) {
  for (int d : {32, 64, 96, 128, 192, 256}) {
    SCOPED_TRACE("d" + std::to_string(d));
    const BwdTileShape entry = bwd_tile_shape(d, d);
    const BwdTileShape compact = compact_bwd_tile_shape(d, d);
    if (d <= 128) {
      EXPECT_LE(bwd_smem_bytes(d, d, compact, 2), kCompactSmemBytes);
      // dK, dV per thread: 16 (Dqk + Dv) / (32 col_split) whatever the warps; no split was added.
      EXPECT_EQ(compact.col_split, entry.col_split);
    } else {
      EXPECT_TRUE(compact == entry) << "d192 / d256 have no compact tile (the naive backward runs them there)";
    }
    if (bwd_smem_bytes(d, d, entry, 2) <= kCompactSmemBytes) EXPECT_TRUE(compact == entry);
  }
}

// Pages of kLargePageRows rows and more take the dense caches' shape at d <= 128 (one token); smaller
// pages the 4-warp shape.
TEST(CompactTileTables, DecodePageSizeSelectsShape) {
  EXPECT_EQ(decode_kv(false, 16), DecodeKv::kDense);
  EXPECT_EQ(decode_kv(true, 1), DecodeKv::kSmallPages);
  EXPECT_EQ(decode_kv(true, kLargePageRows - 1), DecodeKv::kSmallPages);
  EXPECT_EQ(decode_kv(true, kLargePageRows), DecodeKv::kLargePages);
  EXPECT_EQ(decode_kv(true, 256), DecodeKv::kLargePages);
  EXPECT_TRUE(decode_shape(128, 128, false, DecodeKv::kLargePages) == decode_shape(128, 128, false, DecodeKv::kDense));
  EXPECT_FALSE(decode_shape(128, 128, false, DecodeKv::kSmallPages) == decode_shape(128, 128, false, DecodeKv::kDense));
  EXPECT_TRUE(decode_shape(128, 128, true, DecodeKv::kLargePages) == decode_shape(128, 128, true, DecodeKv::kSmallPages));
}

TEST(CompactTileTables, DecodeCompactShapesFit) {
  for (int d : {64, 96, 128, 256})
    for (bool wide : {false, true})
      for (DecodeKv kv : {DecodeKv::kDense, DecodeKv::kSmallPages, DecodeKv::kLargePages}) {
        SCOPED_TRACE("d" + std::to_string(d) + (wide ? " wide" : "") + " kv " + std::to_string(int(kv)));
        const DecodeShape entry = decode_shape(d, d, wide, kv);
        const DecodeShape compact = compact_decode_shape(d, d, wide, kv);
        EXPECT_LE(decode_smem_bytes(d, d, 2, compact), kCompactSmemBytes);
        EXPECT_EQ(compact.m_tiles, entry.m_tiles);
        EXPECT_EQ(compact.warp_keys, entry.warp_keys);
        EXPECT_EQ(decode_compact(d, d, wide, kv, kCompactSmemBytes), !(compact == entry));
        EXPECT_FALSE(decode_compact(d, d, wide, kv, 227 * 1024));
      }
}

}  // namespace
}  // namespace flashcore::sm80
