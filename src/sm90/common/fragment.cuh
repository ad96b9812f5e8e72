// Row operations on a wgmma accumulator fragment (m64nN, fp32).
//
// Layout (tensor-core notes §2): thread (warp w, lane l, g = l/4, t = l%4) holds acc[i] at row
// 16w + g + 8*((i>>1)&1), column 8*(i>>2) + 2t + (i&1). So each thread owns two rows (local row 0
// and 1) and the 4 threads of a quad share them: a row reduction is a thread-local pass plus two
// quad shuffles (attention/quad_reduce.cuh).
#pragma once

#include <cmath>

#include "attention/mask.hpp"
#include "attention/score_transform.hpp"
#include "common/host_device.hpp"
#include "ptx/math.hpp"

namespace flashcore::sm90 {

FC_DEVICE int acc_row(int i) { return (i >> 1) & 1; }                  // local row 0/1 of acc[i]
FC_DEVICE int acc_col(int i, int quad_lane) { return 8 * (i >> 2) + 2 * quad_lane + (i & 1); }

// Every score of the fragment through the softcap in dot units (attn::ScoreTransform::dot_softcap).
template <int kAcc>
FC_DEVICE void apply_softcap(float* s, const attn::DotSoftcap& softcap) {
#pragma unroll
  for (int i = 0; i < kAcc; ++i) s[i] = softcap.apply(s[i]);
}

// The ALiBi bias in dot units subtracted from every score: s -= slope_dot * |i + offset - j|
// (attn::ScoreTransform, with slope_dot = slope / scale since the kernels fold the scale into exp2).
// `row0` / `col0` as apply_mask's; `offset` = Sk - Sq of the sequence. The row's distance to col0 is
// formed once, each element adds its compile-time column offset.
template <int kAcc>
FC_DEVICE void apply_alibi(float* s, float slope_dot, int row0, int col0, int offset) {
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int dist0 = row0 + 8 * r + offset - col0;
#pragma unroll
    for (int i = 0; i < kAcc; ++i) {
      if (acc_row(i) != r) continue;
      const int dist = dist0 - (8 * (i >> 2) + (i & 1));
      s[i] = fmaf(-slope_dot, (float)(dist < 0 ? -dist : dist), s[i]);
    }
  }
}

// Scores of invisible (query, key) pairs, keys past Sk included, become -inf.
// `row0`: this thread's local row 0 as a query index; `col0`: the key of column 2t in this block.
// The visible keys of a row become two offsets from col0, so each element compares its compile-time
// column offset with them: ptxas keeps fewer values live than with absolute keys (d64 fits kBlockN
// 128 in 160 registers this way; with absolute keys it spilled 120 bytes). No overflow: first_key,
// last_key and col0 lie in [-Sq, Sk].
template <int kAcc>
FC_DEVICE void apply_mask(float* s, const attn::VisibilityMask& mask, int row0, int col0) {
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int offset_lo = mask.first_key(row0 + 8 * r) - col0;
    const int offset_hi = mask.last_key(row0 + 8 * r) - col0;
#pragma unroll
    for (int i = 0; i < kAcc; ++i) {
      if (acc_row(i) != r) continue;
      const int offset = 8 * (i >> 2) + (i & 1);
      if (offset < offset_lo || offset > offset_hi) s[i] = -INFINITY;
    }
  }
}

// The max of this thread's scores of each of its two rows (attn::quad_max makes it the row's).
template <int kAcc>
FC_DEVICE void thread_row_max(const float* s, float (&row_max)[2]) {
  static_assert(kAcc >= 4, "each thread holds at least two scores of each of its two rows");
  row_max[0] = fmaxf(s[0], s[1]);  // acc 0, 1: row 0; 2, 3: row 1
  row_max[1] = fmaxf(s[2], s[3]);
#pragma unroll
  for (int i = 4; i < kAcc; ++i) row_max[acc_row(i)] = fmaxf(row_max[acc_row(i)], s[i]);
}

// s <- exp2(s * scale_log2 - max_log2 of its row), each added to its row's `sums` (this thread's part).
template <int kAcc>
FC_DEVICE void exp2_rows(float* s, float scale_log2, const float (&max_log2)[2], float (&sums)[2]) {
#pragma unroll
  for (int i = 0; i < kAcc; ++i) {
    s[i] = ptx::exp2_approx(fmaf(s[i], scale_log2, -max_log2[acc_row(i)]));
    sums[acc_row(i)] += s[i];
  }
}

// O rows *= factor (O's accumulator has the same row mapping as S's).
template <int kAcc>
FC_DEVICE void scale_rows(float* o, const float (&factor)[2]) {
#pragma unroll
  for (int i = 0; i < kAcc; ++i) o[i] *= factor[acc_row(i)];
}

}  // namespace flashcore::sm90
