// sm80 forward epilogue: normalized O accumulators -> the element type (16-bit: rounded and packed
// in pairs; fp32: as is, float2) -> shared memory (padded rows, so the fragment-order writes are
// conflict-free) -> 16-byte coalesced global stores; LSE per row.
#pragma once

#include <cstdint>

#include "ptx/mma_sm80.hpp"
#include "sm80/fwd/tile_config.hpp"

namespace flashcore::sm80 {

// Writes rows [0, rows_valid), columns [0, cols_valid) (a padded call's head_dim_v, a multiple of the
// 16-byte chunk) of the CTA's O tile to `o_tile` (row stride o_row_stride elements) and this thread's LSE values to lse_rows[row] (if lse_rows is not null). Must be called by all
// threads of the CTA after every warp has finished reading sQ/sK/sV (it reuses that memory).
template <class Traits>
FC_DEVICE void store_output(const float (&acc_o)[Traits::kMTiles][Traits::kOutNTiles][4],
                            const float (&lse)[Traits::kMTiles][2], typename Traits::Element* sO,
                            typename Traits::Element* o_tile, int64_t o_row_stride, float* lse_rows,
                            int rows_valid, int cols_valid, int warp_row0, int lane, int tid) {
  using Element = typename Traits::Element;
  const int g = lane >> 2, t = lane & 3;
#pragma unroll
  for (int mt = 0; mt < Traits::kMTiles; ++mt)
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const int row = warp_row0 + mt * 16 + g + 8 * r;
#pragma unroll
      for (int d = 0; d < Traits::kOutNTiles; ++d) {
        Element* dst = sO + row * Traits::kOStride + d * 8 + 2 * t;
        if constexpr (Traits::kTf32x3) {
          *reinterpret_cast<float2*>(dst) = make_float2(acc_o[mt][d][2 * r], acc_o[mt][d][2 * r + 1]);
        } else {
          *reinterpret_cast<uint32_t*>(dst) = ptx::pack2(acc_o[mt][d][2 * r], acc_o[mt][d][2 * r + 1], Element{});
        }
      }
      if (lse_rows != nullptr && t == 0 && row < rows_valid) lse_rows[row] = lse[mt][r];
    }
  __syncthreads();  // sO complete: every thread now reads rows other warps wrote

  constexpr int kChunksPerRow = Traits::kHeadDimV / Traits::kElemsPer16B;
  constexpr int kChunks = Traits::kBlockM * kChunksPerRow;
#pragma unroll
  for (int chunk = tid; chunk < kChunks; chunk += Traits::kThreads) {
    const int row = chunk / kChunksPerRow;
    const int col = (chunk % kChunksPerRow) * Traits::kElemsPer16B;
    if (row < rows_valid && col < cols_valid) {
      *reinterpret_cast<uint4*>(o_tile + row * o_row_stride + col) =
          *reinterpret_cast<const uint4*>(sO + row * Traits::kOStride + col);
    }
  }
}

}  // namespace flashcore::sm80
