// The shared-memory tile layouts of the sm80 kernels (src/sm80/common/smem_layout.hpp): what the
// cp.async copies write and what the ldmatrix lanes read must be the same element, every ldmatrix
// matrix must read 8 distinct bank groups, and swizzled rows must stay on their own 128-byte lines.
#include <cstdint>
#include <set>
#include <string>

#include <gtest/gtest.h>

#include "sm80/common/smem_layout.hpp"
#include "sm80/decode/tile_config.hpp"

namespace flashcore::sm80 {
namespace {

constexpr int kRowsChecked = 64;

// The 16-byte chunks of 8 consecutive rows at one logical chunk (one ldmatrix matrix) fall in
// distinct groups of four banks.
template <bool kSwizzled, int kStride>
void expect_conflict_free(int cols) {
  for (int row0 = 0; row0 < kRowsChecked; row0 += 8)
    for (int chunk = 0; chunk < cols / 8; ++chunk) {
      std::set<int> bank_groups;
      for (int r = row0; r < row0 + 8; ++r) bank_groups.insert((2 * smem_tile_offset<kSwizzled, kStride>(r, 8 * chunk) / 16) % 8);
      EXPECT_EQ(bank_groups.size(), 8u) << "rows " << row0 << "+8, chunk " << chunk;
    }
}

// From a lane's address of (row, chunk 0 or 1), every (row_step, chunk_step) the GEMM helpers take
// lands on the tile offset of (row + row_step, chunk + chunk_step).
template <bool kSwizzled, int kStride>
void expect_steps_match_offsets(int cols, uint32_t tile_base) {
  for (int row = 0; row < 16; ++row)
    for (int lane_chunk = 0; lane_chunk < 2; ++lane_chunk) {
      const uint32_t lane = tile_base + 2 * uint32_t(smem_tile_offset<kSwizzled, kStride>(row, 8 * lane_chunk));
      for (int row_step = 0; row_step < kRowsChecked - 16; row_step += 8)
        for (int chunk_step = 0; chunk_step + lane_chunk < cols / 8; chunk_step += 2) {
          const uint32_t want =
              tile_base + 2 * uint32_t(smem_tile_offset<kSwizzled, kStride>(row + row_step, 8 * (lane_chunk + chunk_step)));
          EXPECT_EQ((smem_step_address<kSwizzled, kStride>(lane, row_step, chunk_step)), want)
              << "row " << row << " chunk " << lane_chunk << " + (" << row_step << ", " << chunk_step << ")";
        }
    }
}

template <int kCols>
void expect_swizzled_rows_on_their_lines() {
  for (int row = 0; row < kRowsChecked; ++row) {
    std::set<int> chunks;
    for (int chunk = 0; chunk < kCols / 8; ++chunk) {
      const int at = smem_tile_offset<true, kCols>(row, 8 * chunk) - row * kCols;
      EXPECT_EQ(at % 8, 0);
      EXPECT_EQ(at / 64, chunk / 8) << "chunk " << chunk << " of row " << row << " left its 128-byte segment";
      chunks.insert(at / 8);
    }
    EXPECT_EQ(chunks.size(), size_t(kCols / 8)) << "row " << row << ": chunks are a permutation";
  }
}

TEST(SmemLayout, SwizzledRowsArePermutationsWithinTheirLines) {
  expect_swizzled_rows_on_their_lines<64>();
  expect_swizzled_rows_on_their_lines<128>();
  expect_swizzled_rows_on_their_lines<256>();
}

TEST(SmemLayout, LdmatrixMatricesAreConflictFree) {
  expect_conflict_free<true, 64>(64);
  expect_conflict_free<true, 128>(128);
  expect_conflict_free<true, 256>(256);
  expect_conflict_free<false, 64 + 8>(64);
  expect_conflict_free<false, 96 + 8>(96);
  expect_conflict_free<false, 128 + 8>(128);
}

TEST(SmemLayout, StepAddressesMatchTileOffsets) {
  for (uint32_t base : {0u, 128u, 4096u + 384u}) {  // swizzled tiles start on a 128-byte line
    SCOPED_TRACE("tile at byte " + std::to_string(base));
    expect_steps_match_offsets<true, 64>(64, base);
    expect_steps_match_offsets<true, 128>(128, base);
    expect_steps_match_offsets<true, 256>(256, base);
  }
  for (uint32_t base : {0u, 16u, 4112u}) {
    SCOPED_TRACE("tile at byte " + std::to_string(base));
    expect_steps_match_offsets<false, 96 + 8>(96, base);
    expect_steps_match_offsets<false, 128 + 8>(128, base);
  }
}

TEST(SmemLayout, DecodeTilesSwizzleWholeLineRows) {
  EXPECT_TRUE((DecodeTraits<128, 128, uint16_t, false, DecodeKv::kDense>::kSwizzledSmem));
  EXPECT_EQ((DecodeTraits<128, 128, uint16_t, false, DecodeKv::kDense>::kKStride), 128);
  EXPECT_TRUE((DecodeTraits<64, 64, uint16_t, false, DecodeKv::kSmallPages>::kSwizzledSmem));
  EXPECT_TRUE((DecodeTraits<256, 256, uint16_t, false, DecodeKv::kSmallPages>::kSwizzledSmem));
  EXPECT_FALSE((DecodeTraits<96, 96, uint16_t, false, DecodeKv::kDense>::kSwizzledSmem));
  EXPECT_EQ((DecodeTraits<96, 96, uint16_t, false, DecodeKv::kDense>::kKStride), 96 + 8);
}

}  // namespace
}  // namespace flashcore::sm80
