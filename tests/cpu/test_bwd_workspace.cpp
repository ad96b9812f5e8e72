// The fused backwards' workspace layout (src/backward/workspace.hpp) and the sm90 backward's tile
// table (src/sm90/bwd/tile_config.hpp), without a device: a call whose main kernel writes dq itself
// (the d256 dQ pass) gets no dQ accumulator and the statistics start the allocation; a sequence's
// padded rows hold every query block that starts in it; the fragment-ordered dQ block
// (src/backward/dq_tile.hpp) is the wgmma accumulator's order and invertible; every tile with a dQ
// pass is a column-split one, and both of its kernels fit the 227 KiB opt-in limit; the dK / dV
// staging tile's offsets are a bijection whose shared-memory accesses do not conflict.
#include <gtest/gtest.h>

#include <algorithm>

#include <vector>

#include "backward/dq_tile.hpp"
#include "backward/workspace.hpp"
#include "flashcore/flashcore.hpp"
#include "sm90/bwd/tile_config.hpp"

namespace flashcore {
namespace {

AttentionParams dense_call(int batch, int seqlen, int heads, int head_dim) {
  AttentionParams p;
  p.batch = batch, p.seqlen_q = p.seqlen_k = seqlen, p.heads_q = p.heads_kv = heads;
  p.head_dim_qk = p.head_dim_v = head_dim;
  return p;
}

TEST(BackwardWorkspace, WithoutTheDqAccumulatorOnlyTheStatisticsAndTurnsRemain) {
  const AttentionParams p = dense_call(2, 1000, 3, 256);
  backward::BwdWorkspaceBytes with, without;
  backward::bwd_workspace_layout(p, 256, nullptr, &with);
  backward::bwd_workspace_layout(p, 256, nullptr, &without, /*with_dq_accum=*/false);
  // 3 heads x 2 sequences x padded_rows(1000) = 1008 + 112 = 1120 rows, each head's 2240 rounded up
  // to 2304 (kBwdRowPad) = 6912 rows.
  EXPECT_EQ(backward::padded_rows(1000), 1120);
  EXPECT_EQ(with.dq_accum, size_t(6912) * 256 * 4);
  EXPECT_EQ(without.dq_accum, 0u);
  EXPECT_EQ(without.stats, with.stats);
  EXPECT_EQ(without.turns, with.turns);
  EXPECT_EQ(without.total(), with.total() - with.dq_accum);

  alignas(256) static char base[1];
  const backward::BwdWorkspace ws = backward::bwd_workspace_layout(p, 256, base, &without, false);
  EXPECT_EQ(ws.dq_accum, nullptr);
  EXPECT_EQ(reinterpret_cast<char*>(ws.lse2), base);
  EXPECT_EQ(reinterpret_cast<char*>(ws.row_d), base + without.stats);
  EXPECT_EQ(ws.row(2, 1, 0, 5), int64_t(2) * ws.rows_per_head + 1120 + 5);
}

// Every query block of at most kBwdRowPad rows that starts inside a sequence at a multiple of
// kRowAlign (the main kernels' blocks of 64, 80 and 128 rows) ends inside its padded rows.
TEST(BackwardWorkspace, PaddedRowsCoverEveryBlockThatStartsInTheSequence) {
  for (int len = 1; len <= 1000; ++len) {
    for (int rows : {64, 80, 128}) {
      const int last_start = (len - 1) / rows * rows;
      EXPECT_LE(last_start + rows, backward::padded_rows(len)) << "len " << len << ", blocks of " << rows;
    }
    EXPECT_EQ(backward::padded_rows(len) % backward::kRowAlign, 0);
  }
}

// The fragment-ordered dQ block (backward/dq_tile.hpp): consumer thread tid's wgmma accumulator
// element i (dQ^T: row = dQ column 64 w + 16 warp + g + 8 ((i / 2) % 2), column = query 8 (i / 4) + 2 t
// + i % 2) sits at float 4 (256 (i / 4) + tid) + i % 4, and dq_tile_element inverts it.
TEST(BackwardWorkspace, DqTileOrderIsTheAccumulatorOrderAndInvertible) {
  constexpr int kRows = 80, kFloats = kRows * backward::kDqTileCols;
  std::vector<int> seen(kFloats, 0);
  for (int tid = 0; tid < backward::kDqTileThreads; ++tid) {
    const int w = tid / 128, warp = (tid / 32) % 4, g = (tid % 32) / 4, t = tid % 4;
    for (int i = 0; i < kRows / 2; ++i) {
      const int d = 64 * w + 16 * warp + g + 8 * ((i / 2) % 2), q = 8 * (i / 4) + 2 * t + i % 2;
      const int f = backward::dq_tile_offset(q, d);
      ASSERT_EQ(f, 4 * (backward::kDqTileThreads * (i / 4) + tid) + i % 4) << "tid " << tid << " i " << i;
      ASSERT_LT(f, kFloats);
      ++seen[f];
      const backward::DqTileElement el = backward::dq_tile_element(f);
      EXPECT_EQ(el.q, q);
      EXPECT_EQ(el.d, d);
    }
  }
  for (int f = 0; f < kFloats; ++f) EXPECT_EQ(seen[f], 1) << "float " << f;
}

TEST(Sm90BackwardTiles, DqPassTilesAreColumnSplitAndFitTheOptInLimit) {
  constexpr size_t kOptInLimit = 227 * 1024;
  int dq_pass_tiles = 0;
  for (int d : {64, 96, 128, 256}) {  // the head dims with kernels of their own
    const sm90::bwd::BwdTile tile = sm90::bwd::bwd_tile(d, d);
    EXPECT_LE(sm90::bwd::bwd_smem_bytes(d, d), kOptInLimit) << "d" << d;
    if (!tile.dq_pass()) continue;
    ++dq_pass_tiles;
    EXPECT_TRUE(tile.col_split) << "d" << d << ": the dQ pass replaces the column split's dQ reductions";
    EXPECT_LE(sm90::bwd::dq_pass_smem_bytes(d, d), kOptInLimit) << "d" << d;
  }
  EXPECT_GT(dq_pass_tiles, 0) << "d256 runs the dQ pass";
  // The dQ pass reads K and V through the main kernel's maps, whose boxes are its block_n rows.
  EXPECT_EQ(sm90::bwd::kDqPassTile.block_n, sm90::bwd::bwd_tile(256, 256).block_n());
}

// The dK / dV staging tile (sm90::bwd::dkdv_staging_offset): every (row, unit) of a warpgroup's 64
// rows gets its own 16 bytes inside its own 128-byte row of the V tile; a warp's 4-byte stores from
// the wgmma accumulators (lane 4 g + t of warp w holds rows 16 w + g + 8 r, columns 8 b + 2 t, + 1 of
// pair index i = 4 b + 2 r) hit 32 distinct banks; and the 16-byte loads of the copy out (thread k of
// the warpgroup: unit k % units of row k / units, in rounds of 128) hit 8 distinct groups of four
// banks per quarter warp where rows are whole 64-column chunks (d96: 2-way at most).
TEST(Sm90BackwardTiles, DkDvStagingIsABijectionAndConflictFree) {
  constexpr int kBlockN = 128;  // the V tile's rows (d64, d96, d128)
  for (int cols : {64, 96, 128}) {
    const int units = cols / 8;
    std::vector<int> seen((cols / 64 + (cols % 64 != 0)) * kBlockN * 128 / 16, 0);
    for (int row = 0; row < 64; ++row)
      for (int unit = 0; unit < units; ++unit) {
        const int offset = sm90::bwd::dkdv_staging_offset(row, unit, kBlockN);
        ASSERT_EQ(offset % 16, 0);
        EXPECT_EQ(offset / 128, (unit / 8) * kBlockN + row) << "row " << row << " unit " << unit << ": its own row";
        ASSERT_LT(offset / 16, int(seen.size()));
        ++seen[offset / 16];
      }
    int used = 0;
    for (int n : seen) {
      EXPECT_LE(n, 1);
      used += n;
    }
    EXPECT_EQ(used, 64 * units) << "cols " << cols;

    for (int warp = 0; warp < 4; ++warp)
      for (int i = 0; i < cols / 2; i += 2) {
        std::vector<int> banks;
        for (int lane = 0; lane < 32; ++lane) {
          const int g = lane / 4, t = lane % 4;
          const int row = 16 * warp + g + 8 * ((i >> 1) & 1), col = 8 * (i >> 2) + 2 * t;
          banks.push_back((sm90::bwd::dkdv_staging_offset(row, col / 8, kBlockN) + 2 * (col % 8)) / 4 % 32);
        }
        std::sort(banks.begin(), banks.end());
        EXPECT_EQ(std::unique(banks.begin(), banks.end()), banks.end()) << "cols " << cols << " warp " << warp
                                                                        << " pair " << i << ": a bank conflict";
      }

    // Whole 64-column chunks: 8 threads read one row's 8 units. d96's rows of 12 units put two rows'
    // half chunks into one quarter warp at times, whose swizzled units can share a group: 2-way at most.
    const int allowed = cols % 64 == 0 ? 1 : 2;
    for (int first = 0; first < 64 * units; first += 8) {
      int per_group[8] = {};
      for (int k = first; k < first + 8; ++k) {
        ++per_group[sm90::bwd::dkdv_staging_offset(k / units, k % units, kBlockN) / 16 % 8];
      }
      EXPECT_LE(*std::max_element(per_group, per_group + 8), allowed)
          << "cols " << cols << " threads " << first << "+8";
    }
  }
}

}  // namespace
}  // namespace flashcore
