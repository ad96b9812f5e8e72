// The fused backwards' postprocess: the fp32 dQ accumulator (workspace.hpp) times the softmax scale
// (the main kernel leaves it out of dS) -> dq in the element type, with the caller's strides. Rows
// with no visible key were never added to and come out 0.
#pragma once

#include "attention/mask.hpp"
#include "attention/score_transform.hpp"
#include "common/device_dtype.cuh"
#include "backward/dq_tile.hpp"
#include "backward/workspace.hpp"
#include "ptx/barrier.hpp"

namespace flashcore::backward {

inline constexpr int kPostprocessRows = 64;
inline constexpr int kPostprocessThreads = 256;

// Rows [m0, m0 + rows) of (query head h, batch entry b) into dq: row r from the fp32 row at
// src + r * pitch (global or shared memory, 16-byte aligned), times `scale`, converted; 8 columns
// (two float4 in, one uint4 out) per thread and step.
template <typename Element>
FC_DEVICE void write_dq_rows(const BackwardParams& bp, const attn::SequenceExtent& seq, int h, int b, int m0, int rows,
                             const float* src, int pitch, float scale) {
  const AttentionParams& p = bp.forward;
  const int chunks_per_row = p.head_dim_qk / 8;
  Element* dq = static_cast<Element*>(bp.dq) + attn::token_offset(p.is_varlen(), bp.dq_batch_stride, bp.dq_seq_stride,
                                                                   bp.dq_head_stride, b, seq.q_start + m0, h);
  for (int c = threadIdx.x; c < rows * chunks_per_row; c += kPostprocessThreads) {
    const int r = c / chunks_per_row, col = (c % chunks_per_row) * 8;
    const float4 lo = *reinterpret_cast<const float4*>(src + int64_t(r) * pitch + col);
    const float4 hi = *reinterpret_cast<const float4*>(src + int64_t(r) * pitch + col + 4);
    const float values[8] = {lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w};
    alignas(16) Element out[8];
#pragma unroll
    for (int e = 0; e < 8; ++e) out[e] = from_float<Element>(values[e] * scale);
    *reinterpret_cast<uint4*>(dq + int64_t(r) * bp.dq_seq_stride + col) = *reinterpret_cast<const uint4*>(out);
  }
}

// grid (round_up(max Sq, kPostprocessRows) / kPostprocessRows, Hq, B)
template <typename Element>
__global__ void __launch_bounds__(kPostprocessThreads) bwd_postprocess_kernel(const BackwardParams bp,
                                                                              const BwdWorkspace ws) {
  const AttentionParams& p = bp.forward;
  const int h = blockIdx.y, b = blockIdx.z;
  const attn::SequenceExtent seq = attn::sequence_extent(p, b);
  const int m0 = blockIdx.x * kPostprocessRows;
  if (m0 >= seq.seqlen_q) return;
  ptx::wait_for_previous_grid();  // a programmatic dependent of the main kernel (run.cuh)
  const float* acc = ws.dq_accum + ws.row(h, b, seq.q_start, m0) * ws.dq_row_stride;
  write_dq_rows<Element>(bp, seq, h, b, m0, min(kPostprocessRows, seq.seqlen_q - m0), acc, ws.dq_row_stride,
                         attn::softmax_scale(p));
}

// Fragment-ordered accumulators (ws.dq_tile_rows > 0, dq_tile.hpp): one CTA per block. The block's
// floats are read in order (16 bytes per thread), each placed at its (row, column) in shared memory
// (kDqTilePitch floats per row), then written out as rows (write_dq_rows).
inline constexpr int kDqTilePitch = kDqTileCols + 4;  // a padded row keeps the scattered stores apart

// grid (ceil(max Sq / ws.dq_tile_rows), Hq, B); dynamic shared memory dq_tile_rows * kDqTilePitch floats
template <typename Element>
__global__ void __launch_bounds__(kPostprocessThreads) bwd_postprocess_tiles_kernel(const BackwardParams bp,
                                                                                    const BwdWorkspace ws) {
  extern __shared__ float4 tile_storage[];
  float* tile = reinterpret_cast<float*>(tile_storage);
  const AttentionParams& p = bp.forward;
  const int h = blockIdx.y, b = blockIdx.z;
  const attn::SequenceExtent seq = attn::sequence_extent(p, b);
  const int block_rows = ws.dq_tile_rows;
  const int m0 = blockIdx.x * block_rows;
  if (m0 >= seq.seqlen_q) return;
  ptx::wait_for_previous_grid();
  const float4* acc =
      reinterpret_cast<const float4*>(ws.dq_accum + ws.row(h, b, seq.q_start, m0) * int64_t(kDqTileCols));
  for (int f4 = threadIdx.x; f4 < block_rows * kDqTileCols / 4; f4 += kPostprocessThreads) {
    const float4 v = acc[f4];
    const float values[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const DqTileElement el = dq_tile_element(4 * f4 + e);
      tile[el.q * kDqTilePitch + el.d] = values[e];
    }
  }
  __syncthreads();
  write_dq_rows<Element>(bp, seq, h, b, m0, min(block_rows, seq.seqlen_q - m0), tile, kDqTilePitch,
                         attn::softmax_scale(p));
}

}  // namespace flashcore::backward
