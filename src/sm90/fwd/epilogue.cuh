// Epilogue: O = O_acc / row_sum in the output dtype, and LSE (natural log, -inf for empty rows).
//
// Two ways out, chosen per head dim by tile_config.hpp's kEpilogueTma:
//   EpilogueTma     each consumer warpgroup writes its 64 x Dv fragment into its own swizzled
//                   shared-memory tile and one thread issues a TMA store (rows past Sq are clipped
//                   by the tensor map). Conflict-free: for one accumulator pair index, a warp's 32
//                   threads hit 8 rows x 4 column pairs = 32 distinct banks thanks to the swizzle.
//                   Varlen: the o map is the packed token axis, so rows past a sequence's end are
//                   the next sequence's: a warpgroup whose 64 rows do not all lie inside its
//                   sequence stores directly instead, row by row (EpilogueDirect).
//   EpilogueDirect  each thread stores its element pairs straight to global memory (4 bytes each),
//                   rows past the sequence skipped; used where shared memory has no room for the
//                   staging tiles (d256, 192/128).
// LSE is always stored directly (one float per row, by the quad's first thread).
#pragma once

#include <cuda.h>

#include <type_traits>

#include "ptx/barrier.hpp"
#include "ptx/mbarrier.hpp"
#include "ptx/tma.hpp"
#include "sm90/fwd/kernel_traits.cuh"
#include "sm90/fwd/params.hpp"
#include "sm90/common/element.cuh"
#include "sm90/common/fragment.cuh"
#include "sm90/common/tma.cuh"
#include "sm90/fwd/scheduler.cuh"

namespace flashcore::sm90 {

// Row `row` of the tile's sequence is element q_offset + row of its lse head row (varlen: the
// packed token, varlen batch strides are 0; dense: q_offset = 0 and the batch stride applies).
template <class Traits, class Scheduler>
FC_DEVICE void store_lse(const KernelParams& params, const Tile<Traits::kVarlen>& tile, int row0, int lane, const float (&lse)[2]) {
  if (params.lse == nullptr || lane % 4 != 0) return;
  float* lse_head = params.lse + (int64_t)tile.batch * params.lse_batch_stride + (int64_t)tile.head * params.lse_head_stride;
  if constexpr (Traits::kVarlen) lse_head += tile.q_offset;
  const int rows_end = Scheduler::rows_end(params, tile);
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    if (row0 + 8 * r < rows_end) lse_head[row0 + 8 * r] = lse[r];
  }
}


template <class Traits, class Scheduler>
struct EpilogueDirect {
  using Element = typename Traits::Element;

  static __device__ void store(const KernelParams& params, const CUtensorMap*, uint8_t*, const Tile<Traits::kVarlen>& tile,
                               int warpgroup, int warp, int lane, const float* o, const float (&inv_sum)[2],
                               const float (&lse)[2]) {
    const int row0 = Scheduler::row_first(params, tile) + warpgroup * 64 + 16 * warp + lane / 4;
    const int quad_lane = lane % 4;
    uint16_t* o_head = static_cast<uint16_t*>(params.o) + (int64_t)tile.batch * params.o_batch_stride +
                       (int64_t)tile.head * params.o_head_stride;
    if constexpr (Traits::kVarlen) o_head += (int64_t)tile.q_offset * params.o_seq_stride;
    const int rows_end = Scheduler::rows_end(params, tile);
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const int row = row0 + 8 * r;
      if (row >= rows_end) continue;
      uint16_t* o_row = o_head + (int64_t)row * params.o_seq_stride;
#pragma unroll
      for (int i = 2 * r; i < Traits::kAccO; i += 4) {  // acc pairs (i, i+1) of local row r
        const int col = acc_col(i, quad_lane);
        if (col >= params.head_dim_v) continue;  // a padded call's columns end first (even, so pairs stay whole)
        *reinterpret_cast<uint32_t*>(o_row + col) =
            ElementTraits<Element>::pack(o[i] * inv_sum[r], o[i + 1] * inv_sum[r]);
      }
    }
    store_lse<Traits, Scheduler>(params, tile, row0, lane, lse);
  }
  static __device__ void drain(int) {}
};

template <class Traits, class Scheduler>
struct EpilogueTma {
  using Element = typename Traits::Element;

  // `o_staging`: this CTA's staging tiles; warpgroup w uses [w * kOTileBytes, (w+1) * kOTileBytes).
  static __device__ void store(const KernelParams& params, const CUtensorMap* tm_o, uint8_t* o_staging,
                               const Tile<Traits::kVarlen>& tile, int warpgroup, int warp, int lane, const float* o,
                               const float (&inv_sum)[2], const float (&lse)[2]) {
    const int row_first = Scheduler::row_first(params, tile) + warpgroup * 64;  // in the sequence
    if constexpr (Traits::kVarlen || Traits::kPartialBlockFirst) {
      // This warpgroup's 64 rows reach past the rows the tile owns (warpgroup-uniform), into rows
      // a TMA box would overwrite: the next packed sequence's (varlen), or block 1's (block 0 of a
      // kPartialBlockFirst kernel). It stores row by row instead. (Past the end of a dense tensor
      // a box stores nothing, so only packed varlen rows count there.)
      const bool rows_beyond_are_others = !Traits::kVarlen || params.cu_seqlens_q != nullptr;
      if (rows_beyond_are_others && row_first + 64 > Scheduler::rows_end(params, tile)) {
        EpilogueDirect<Traits, Scheduler>::store(params, tm_o, o_staging, tile, warpgroup, warp, lane, o, inv_sum, lse);
        return;
      }
    }
    uint8_t* o_tile = o_staging + warpgroup * Traits::kOTileBytes;
    const int thread_in_wg = warp * 32 + lane;
    const int barrier = kWarpgroupBarrier + warpgroup;
    // The previous tile's TMA store (issued by thread 0 of this warpgroup) must have finished
    // reading the staging tile before anyone overwrites it: thread 0 waits, the barrier tells the
    // other 127 threads of the warpgroup.
    if (thread_in_wg == 0) ptx::tma_store_wait_read();
    ptx::named_barrier_sync(barrier, 128);

    const int local_row0 = 16 * warp + lane / 4;  // rows local_row0 and local_row0 + 8 of the tile
    const int quad_lane = lane % 4;
#pragma unroll
    for (int i = 0; i < Traits::kAccO; i += 2) {
      const int r = acc_row(i);
      const int row = local_row0 + 8 * r;
      const int col = acc_col(i, quad_lane);
      // [Dv/64][64 rows][64 cols] with the 128-byte swizzle: 16-byte chunk c of row `row` sits at
      // chunk c ^ (row % 8), matching the tensor map's CU_TENSOR_MAP_SWIZZLE_128B.
      const uint32_t offset = (col / 64) * (64 * 128) + row * 128 + ((((col % 64) / 8) ^ (row % 8)) * 16) + (col % 8) * 2;
      *reinterpret_cast<uint32_t*>(o_tile + offset) = ElementTraits<Element>::pack(o[i] * inv_sum[r], o[i + 1] * inv_sum[r]);
    }
    // Generic-proxy smem writes -> async-proxy (TMA) reads: every writer fences, then the barrier
    // orders all 128 writers before thread 0 issues the store.
    ptx::fence_proxy_async_smem();
    ptx::named_barrier_sync(barrier, 128);
    if (thread_in_wg == 0) {
      tma_store_operand<Traits::kDv>(tm_o, o_tile, tile.q_offset + row_first, tile.head, tile.map_batch(),
                                     params.v_per_chunk);
      ptx::tma_store_commit();
    }
    store_lse<Traits, Scheduler>(params, tile, row_first + local_row0, lane, lse);
  }
  // Before the CTA exits: the last store must have finished reading shared memory.
  static __device__ void drain(int thread_in_wg) {
    if (thread_in_wg == 0) ptx::tma_store_wait_all();
  }
};

// The epilogue a kernel's tile configuration asks for (kEpilogueTma, when shared memory has room).
template <class Traits, class Scheduler>
using EpilogueFor = std::conditional_t<Traits::kEpilogueTma, EpilogueTma<Traits, Scheduler>, EpilogueDirect<Traits, Scheduler>>;

}  // namespace flashcore::sm90
