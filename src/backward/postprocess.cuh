// The fused backwards' postprocess: the fp32 dQ accumulator (workspace.hpp) times the softmax scale
// (the main kernel leaves it out of dS) -> dq in the element type, with the caller's strides. Rows
// with no visible key were never added to and come out 0.
#pragma once

#include "attention/mask.hpp"
#include "attention/score_transform.hpp"
#include "common/device_dtype.cuh"
#include "backward/workspace.hpp"

namespace flashcore::backward {

inline constexpr int kPostprocessRows = 64;
inline constexpr int kPostprocessThreads = 256;

// grid (round_up(max Sq, kPostprocessRows) / kPostprocessRows, Hq, B)
template <typename Element>
__global__ void __launch_bounds__(kPostprocessThreads) bwd_postprocess_kernel(const BackwardParams bp,
                                                                              const BwdWorkspace ws) {
  const AttentionParams& p = bp.forward;
  const int h = blockIdx.y, b = blockIdx.z;
  const attn::SequenceExtent seq = attn::sequence_extent(p, b);
  const int m0 = blockIdx.x * kPostprocessRows;
  if (m0 >= seq.seqlen_q) return;
  const int rows = min(kPostprocessRows, seq.seqlen_q - m0);
  const float scale = attn::softmax_scale(p);
  const int chunks_per_row = p.head_dim_qk / 8;  // 8 elements: two float4 in, one uint4 out
  const float* acc = ws.dq_accum + ws.row(h, b, seq.q_start, m0) * ws.dq_row_stride;
  Element* dq = static_cast<Element*>(bp.dq) + attn::token_offset(p.is_varlen(), bp.dq_batch_stride, bp.dq_seq_stride,
                                                                   bp.dq_head_stride, b, seq.q_start + m0, h);
  for (int c = threadIdx.x; c < rows * chunks_per_row; c += kPostprocessThreads) {
    const int r = c / chunks_per_row, col = (c % chunks_per_row) * 8;
    const float4 lo = *reinterpret_cast<const float4*>(acc + int64_t(r) * ws.dq_row_stride + col);
    const float4 hi = *reinterpret_cast<const float4*>(acc + int64_t(r) * ws.dq_row_stride + col + 4);
    const float values[8] = {lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w};
    alignas(16) Element out[8];
#pragma unroll
    for (int e = 0; e < 8; ++e) out[e] = from_float<Element>(values[e] * scale);
    *reinterpret_cast<uint4*>(dq + int64_t(r) * bp.dq_seq_stride + col) = *reinterpret_cast<const uint4*>(out);
  }
}

}  // namespace flashcore::backward
