// Epilogue: O = O_acc / row_sum written to global memory in the output dtype, and LSE.
//
// Direct register -> global stores (4 bytes per thread per pair of columns; a quad covers 16
// contiguous bytes of a row). Rows past Sq are not written. A TMA store through shared memory is
// the planned replacement (see docs/perf-notes-sm90.md); this version needs no extra shared memory
// and no synchronization with the producer.
#pragma once

#include "sm90/kernel_traits.cuh"
#include "sm90/params.hpp"
#include "sm90/scheduler.cuh"
#include "sm90/softmax.cuh"

namespace flashcore::sm90 {

template <class Traits>
struct EpilogueDirect {
  using Element = typename Traits::Element;

  static __device__ void store(const KernelParams& params, const Tile& tile, int warpgroup, int warp, int lane,
                               const float* o, const float (&inv_sum)[2], const float (&lse)[2]) {
    const int row0 = tile.m_block * Traits::kBlockM + warpgroup * 64 + 16 * warp + lane / 4;
    const int quad_lane = lane % 4;
    uint16_t* o_head = static_cast<uint16_t*>(params.o) + (int64_t)tile.batch * params.o_batch_stride +
                       (int64_t)tile.head * params.o_head_stride;
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const int row = row0 + 8 * r;
      if (row >= params.seqlen_q) continue;
      uint16_t* o_row = o_head + (int64_t)row * params.o_seq_stride;
#pragma unroll
      for (int i = 2 * r; i < Traits::kAccO; i += 4) {  // acc pairs (i, i+1) of local row r
        const int col = acc_col(i, quad_lane);
        *reinterpret_cast<uint32_t*>(o_row + col) =
            ElementTraits<Element>::pack(o[i] * inv_sum[r], o[i + 1] * inv_sum[r]);
      }
      if (params.lse != nullptr && quad_lane == 0) {
        params.lse[(int64_t)tile.batch * params.lse_batch_stride + (int64_t)tile.head * params.lse_head_stride + row] =
            lse[r];
      }
    }
  }
};

}  // namespace flashcore::sm90
