// sm80 forward mainloop pieces: asynchronous tile loads (cp.async, 16 B per thread, zero-filled
// tails) and the two warp-level GEMMs, S = Q K^T and O += P V, on mma.sync m16n8k16 with ldmatrix.
//
// Warp w owns query rows [w * kRowsPerWarp, (w + 1) * kRowsPerWarp) of the CTA tile, as kMTiles
// m16 tiles. Fragment layouts (l = lane, g = l / 4, t = l % 4), from the PTX ISA:
//   A reg r: row g + 8 (r & 1), cols 2t + 8 (r >> 1) + {0, 1}
//   B reg r: k 2t + 8 r + {0, 1}, col g
//   C c_i:   row g + 8 (i >> 1), col 2t + (i & 1)
#pragma once

#include <cstdint>

#include "ptx/mma_sm80.hpp"
#include "sm80/tile_config.hpp"

namespace flashcore::sm80 {

FC_HOST_DEVICE constexpr int gcd_int(int a, int b) { return b == 0 ? a : gcd_int(b, a % b); }

// Copies rows [0, kRows) of a [rows][kCols] global tile (row stride `row_stride` elements, 16-byte
// aligned rows) into shared memory with row stride kSmemStride. Rows >= rows_valid are zero-filled
// and never read from global memory. kThreadsPerRow consecutive threads cover consecutive 16-byte
// chunks of one row (>= 64 contiguous bytes per row and warp instruction). Each thread walks its
// rows with one running pointer, so no per-copy 64-bit address stays live across the mainloop.
template <int kRows, int kCols, int kSmemStride, int kThreads, typename Element>
FC_DEVICE void load_tile_async(Element* smem_tile, const Element* gmem_tile, int64_t row_stride,
                               int rows_valid, int tid) {
  constexpr int kChunksPerRow = kCols / 8;
  constexpr int kThreadsPerRow = gcd_int(kChunksPerRow, kThreads);
  constexpr int kRowStep = kThreads / kThreadsPerRow;  // rows between two copies of one thread
  constexpr int kColIters = kChunksPerRow / kThreadsPerRow;
  static_assert(kRows % kRowStep == 0, "every thread copies the same number of rows");
  const int row0 = tid / kThreadsPerRow;
  const int col0 = (tid % kThreadsPerRow) * 8;
  const Element* src_row = gmem_tile + row0 * row_stride + col0;
  const uint32_t dst_row0 = ptx::smem_address(smem_tile + row0 * kSmemStride + col0);
#pragma unroll
  for (int r = 0; r < kRows / kRowStep; ++r) {
    const bool valid = row0 + r * kRowStep < rows_valid;
#pragma unroll
    for (int c = 0; c < kColIters; ++c) {
      const uint32_t dst = dst_row0 + (r * kRowStep * kSmemStride + c * kThreadsPerRow * 8) * sizeof(Element);
      // An invalid row reads nothing; pass the tile base so the address is still a real one.
      ptx::cp_async_16(dst, valid ? src_row + c * kThreadsPerRow * 8 : gmem_tile, valid);
    }
    src_row += kRowStep * row_stride;
  }
}

// acc_s[mt][nt] = Q_warp[mt] K_block[nt]^T. sQ / sK are the CTA's padded tiles; `warp_row0` is the
// first query row of this warp inside the CTA tile.
template <class Traits>
FC_DEVICE void gemm_qk(float (&acc_s)[Traits::kMTiles][Traits::kScoreNTiles][4],
                       const typename Traits::Element* sQ, const typename Traits::Element* sK,
                       int warp_row0, int lane) {
  using Element = typename Traits::Element;
#pragma unroll
  for (int mt = 0; mt < Traits::kMTiles; ++mt)
#pragma unroll
    for (int nt = 0; nt < Traits::kScoreNTiles; ++nt)
#pragma unroll
      for (int i = 0; i < 4; ++i) acc_s[mt][nt][i] = 0.0f;

  // A (Q, [m][k]): matrix j = rows 8 (j & 1), cols 8 (j >> 1)  -> lane row l % 16, col 8 (l / 16).
  const uint32_t q_lane = ptx::smem_address(sQ + (warp_row0 + (lane & 15)) * Traits::kQStride + 8 * (lane >> 4));
  // B (K, [n][k]): matrix j = n-tile j >> 1, cols 8 (j & 1) -> lane row 8 (l / 16) + l % 8, col 8 ((l / 8) & 1).
  const uint32_t k_lane =
      ptx::smem_address(sK + (8 * (lane >> 4) + (lane & 7)) * Traits::kKStride + 8 * ((lane >> 3) & 1));
  constexpr uint32_t kElemBytes = sizeof(Element);

#pragma unroll
  for (int ks = 0; ks < Traits::kHeadDimQK / 16; ++ks) {
    uint32_t a[Traits::kMTiles][4];
#pragma unroll
    for (int mt = 0; mt < Traits::kMTiles; ++mt)
      ptx::ldmatrix_x4(a[mt], q_lane + (mt * 16 * Traits::kQStride + ks * 16) * kElemBytes);
#pragma unroll
    for (int np = 0; np < Traits::kScoreNTiles / 2; ++np) {
      uint32_t b[4];
      ptx::ldmatrix_x4(b, k_lane + (np * 16 * Traits::kKStride + ks * 16) * kElemBytes);
      const uint32_t b_lo[2] = {b[0], b[1]};
      const uint32_t b_hi[2] = {b[2], b[3]};
#pragma unroll
      for (int mt = 0; mt < Traits::kMTiles; ++mt) {
        ptx::mma_m16n8k16(acc_s[mt][2 * np], a[mt], b_lo, Element{});
        ptx::mma_m16n8k16(acc_s[mt][2 * np + 1], a[mt], b_hi, Element{});
      }
    }
  }
}

// acc_o[mt] += P[mt] V_block, with P taken from the softmax'ed S accumulators of this warp: the C
// fragments of n-tiles 2kk and 2kk+1, rounded to 16 bits, are exactly the A fragment of k-step kk
// (P never leaves registers). Rounding just before each k-step keeps few packed registers live.
template <class Traits>
FC_DEVICE void gemm_pv(float (&acc_o)[Traits::kMTiles][Traits::kOutNTiles][4],
                       const float (&p)[Traits::kMTiles][Traits::kScoreNTiles][4],
                       const typename Traits::Element* sV, int lane) {
  using Element = typename Traits::Element;
  // B (V, [k][n], transposed by ldmatrix): matrix j = rows 8 (j & 1), cols 8 (j >> 1)
  //   -> lane row l % 16, col 8 (l / 16); regs 0-1 = n-tile 0, regs 2-3 = n-tile 1.
  const uint32_t v_lane = ptx::smem_address(sV + (lane & 15) * Traits::kVStride + 8 * (lane >> 4));
  constexpr uint32_t kElemBytes = sizeof(Element);

#pragma unroll
  for (int kk = 0; kk < Traits::kBlockN / 16; ++kk) {
    uint32_t a[Traits::kMTiles][4];
#pragma unroll
    for (int mt = 0; mt < Traits::kMTiles; ++mt) {
      a[mt][0] = ptx::pack2(p[mt][2 * kk][0], p[mt][2 * kk][1], Element{});
      a[mt][1] = ptx::pack2(p[mt][2 * kk][2], p[mt][2 * kk][3], Element{});
      a[mt][2] = ptx::pack2(p[mt][2 * kk + 1][0], p[mt][2 * kk + 1][1], Element{});
      a[mt][3] = ptx::pack2(p[mt][2 * kk + 1][2], p[mt][2 * kk + 1][3], Element{});
    }
#pragma unroll
    for (int dp = 0; dp < Traits::kOutNTiles / 2; ++dp) {
      uint32_t b[4];
      ptx::ldmatrix_x4_trans(b, v_lane + (kk * 16 * Traits::kVStride + dp * 16) * kElemBytes);
      const uint32_t b_lo[2] = {b[0], b[1]};
      const uint32_t b_hi[2] = {b[2], b[3]};
#pragma unroll
      for (int mt = 0; mt < Traits::kMTiles; ++mt) {
        ptx::mma_m16n8k16(acc_o[mt][2 * dp], a[mt], b_lo, Element{});
        ptx::mma_m16n8k16(acc_o[mt][2 * dp + 1], a[mt], b_hi, Element{});
      }
    }
  }
}

}  // namespace flashcore::sm80
