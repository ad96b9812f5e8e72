// The fused backwards' preprocess: per query row, D = rowsum(dO * O) in fp32 and the forward's LSE
// in log2 units, into the workspace (workspace.hpp); padding rows get D = 0 and lse2 = +inf, and so
// do rows whose LSE is -inf (no visible key), so P = exp2(s - lse2) is 0 there without a branch.
// It also zeroes the dQ accumulator's rows (when there is one): its CTAs cover every row a main
// kernel adds into (each sequence's padded_rows per head), and a row's floats are contiguous in
// both accumulator layouts (row-major, and fragment-ordered blocks: dq_tile.hpp), so each warp
// clears the span of its own rows; that saves a memset pass over the accumulator.
#pragma once

#include <cmath>

#include "attention/constants.hpp"
#include "attention/mask.hpp"
#include "common/device_dtype.cuh"
#include "backward/workspace.hpp"
#include "ptx/barrier.hpp"

namespace flashcore::backward {

inline constexpr int kPreprocessRows = 64;     // rows per CTA
inline constexpr int kPreprocessThreads = 256;  // a warp per kPreprocessRows / 8 consecutive rows

// grid (ceil(padded_rows(max Sq) / kPreprocessRows), Hq, B)
template <typename Element>
__global__ void __launch_bounds__(kPreprocessThreads) bwd_preprocess_kernel(const BackwardParams bp,
                                                                            const BwdWorkspace ws) {
  ptx::allow_next_grid_to_start();  // the main kernel may start its prologue (run.cuh)
  const AttentionParams& p = bp.forward;
  const int h = blockIdx.y, b = blockIdx.z;
  const attn::SequenceExtent seq = attn::sequence_extent(p, b);
  const int rows = int(padded_rows(seq.seqlen_q));
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const bool packed = p.is_varlen();
  const int64_t lse_base = attn::token_offset(packed, p.lse_batch_stride, 1, p.lse_head_stride, b, seq.q_start, h);
  const int64_t o_base = attn::token_offset(packed, p.o_batch_stride, p.o_seq_stride, p.o_head_stride, b, seq.q_start, h);
  const int64_t do_base = attn::token_offset(packed, bp.dout_batch_stride, bp.dout_seq_stride, bp.dout_head_stride, b,
                                             seq.q_start, h);
  // A warp takes kRowsInFlight rows at a time and issues all their loads before it sums any: one
  // row at a time left a warp waiting out a memory latency per row.
  constexpr int kChunk = 8;  // 16 bytes of Element
  constexpr int kRowsInFlight = 4;
  constexpr int kRowsPerWarp = kPreprocessRows / (kPreprocessThreads / 32);
  static_assert(kRowsPerWarp % kRowsInFlight == 0, "whole groups of rows per warp");
  const int first_row = blockIdx.x * kPreprocessRows + warp * kRowsPerWarp;
  if (ws.dq_accum != nullptr && first_row < rows) {
    // Row strides are multiples of 4 floats (head dims are multiples of 8), so 16-byte stores.
    const int row_count = min(kRowsPerWarp, rows - first_row);
    float4* span = reinterpret_cast<float4*>(ws.dq_accum + ws.row(h, b, seq.q_start, first_row) * ws.dq_row_stride);
    const int vectors = row_count * ws.dq_row_stride / 4;
    for (int i = lane; i < vectors; i += 32) span[i] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  }
  for (int r0 = 0; r0 < kRowsPerWarp; r0 += kRowsInFlight) {
    float d[kRowsInFlight], lse[kRowsInFlight];
#pragma unroll
    for (int k = 0; k < kRowsInFlight; ++k) {
      const int i = first_row + r0 + k;
      d[k] = 0.0f;
      lse[k] = i < seq.seqlen_q ? p.lse[lse_base + i] : -INFINITY;
    }
    for (int c = lane * kChunk; c < p.head_dim_v; c += 32 * kChunk) {
      uint4 ov[kRowsInFlight], dv[kRowsInFlight];
#pragma unroll
      for (int k = 0; k < kRowsInFlight; ++k) {
        const int i = first_row + r0 + k;
        ov[k] = dv[k] = make_uint4(0u, 0u, 0u, 0u);
        if (i < seq.seqlen_q) {
          ov[k] = *reinterpret_cast<const uint4*>(static_cast<const Element*>(p.o) + o_base +
                                                  int64_t(i) * p.o_seq_stride + c);
          dv[k] = *reinterpret_cast<const uint4*>(static_cast<const Element*>(bp.dout) + do_base +
                                                  int64_t(i) * bp.dout_seq_stride + c);
        }
      }
#pragma unroll
      for (int k = 0; k < kRowsInFlight; ++k) {
        const Element* oe = reinterpret_cast<const Element*>(&ov[k]);
        const Element* de = reinterpret_cast<const Element*>(&dv[k]);
#pragma unroll
        for (int e = 0; e < kChunk; ++e) d[k] = fmaf(to_float(oe[e]), to_float(de[e]), d[k]);
      }
    }
#pragma unroll
    for (int k = 0; k < kRowsInFlight; ++k) {
#pragma unroll
      for (int off = 16; off > 0; off >>= 1) d[k] += __shfl_xor_sync(0xffffffffu, d[k], off);
    }
    if (lane < kRowsInFlight) {
      // Lane k stores row k (after the butterfly every lane holds every sum; selecting with constant
      // indices keeps d[] in registers).
      float row_d = d[0], row_lse = lse[0];
#pragma unroll
      for (int k = 1; k < kRowsInFlight; ++k) {
        if (lane == k) row_d = d[k], row_lse = lse[k];
      }
      const int i = first_row + r0 + lane;
      if (i < rows) {
        // Padding rows, and rows whose LSE is -inf (no visible key): D = 0, lse2 = +inf.
        const int64_t row = ws.row(h, b, seq.q_start, i);
        ws.row_d[row] = row_d;
        ws.lse2[row] = row_lse == -INFINITY ? INFINITY : row_lse * attn::kLog2e;
      }
    }
  }
}

}  // namespace flashcore::backward
