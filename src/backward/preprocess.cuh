// The fused backwards' preprocess: per query row, D = rowsum(dO * O) in fp32 and the forward's LSE
// in log2 units, into the workspace (workspace.hpp); padding rows get D = 0 and lse2 = +inf, and so
// do rows whose LSE is -inf (no visible key), so P = exp2(s - lse2) is 0 there without a branch.
#pragma once

#include <cmath>

#include "attention/constants.hpp"
#include "attention/mask.hpp"
#include "common/device_dtype.cuh"
#include "backward/workspace.hpp"

namespace flashcore::backward {

inline constexpr int kPreprocessRows = 64;     // rows per CTA
inline constexpr int kPreprocessThreads = 256;  // one warp per row at a time

// grid (ceil(padded_rows(max Sq) / kPreprocessRows), Hq, B)
template <typename Element>
__global__ void __launch_bounds__(kPreprocessThreads) bwd_preprocess_kernel(const BackwardParams bp,
                                                                            const BwdWorkspace ws) {
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
  constexpr int kChunk = 8;  // 16 bytes of Element
  for (int r = warp; r < kPreprocessRows; r += kPreprocessThreads / 32) {
    const int i = blockIdx.x * kPreprocessRows + r;
    if (i >= rows) break;
    float d = 0.0f;
    float lse2 = INFINITY;
    if (i < seq.seqlen_q) {
      const Element* o = static_cast<const Element*>(p.o) + o_base + int64_t(i) * p.o_seq_stride;
      const Element* dout = static_cast<const Element*>(bp.dout) + do_base + int64_t(i) * bp.dout_seq_stride;
      for (int c = lane * kChunk; c < p.head_dim_v; c += 32 * kChunk) {
        const uint4 ov = *reinterpret_cast<const uint4*>(o + c);
        const uint4 dv = *reinterpret_cast<const uint4*>(dout + c);
        const Element* oe = reinterpret_cast<const Element*>(&ov);
        const Element* de = reinterpret_cast<const Element*>(&dv);
#pragma unroll
        for (int e = 0; e < kChunk; ++e) d = fmaf(to_float(oe[e]), to_float(de[e]), d);
      }
#pragma unroll
      for (int off = 16; off > 0; off >>= 1) d += __shfl_xor_sync(0xffffffffu, d, off);
      const float lse = p.lse[lse_base + i];
      lse2 = lse == -INFINITY ? INFINITY : lse * attn::kLog2e;
    }
    if (lane == 0) {
      const int64_t row = ws.row(h, b, seq.q_start, i);
      ws.row_d[row] = d;
      ws.lse2[row] = lse2;
    }
  }
}

}  // namespace flashcore::backward
