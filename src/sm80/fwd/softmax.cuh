// Online softmax on the S = Q K^T accumulator fragments of one warp (FlashAttention-2 style).
//
// Scores are kept in "softmax units" u, with the log2 score being u * log2_multiplier:
//   plain scores (no softcap, no ALiBi, scale > 0): u = <q, k>, log2_multiplier = scale * log2(e),
//     so the hot loop never touches S before the max and p = exp2(u * mult - max * mult) is one FFMA
//     and one EX2;
//   softcap / ALiBi: u = ScoreTransform::apply(<q, k>) * log2(e), log2_multiplier = 1.
// Each thread holds two rows per m16 tile (g and g + 8) and two columns per n8 tile; a row's four
// owners are the lanes of one quad, so row reductions are two xor-shuffles.
#pragma once

#include <cmath>

#include "attention/mask.hpp"
#include "attention/score_transform.hpp"
#include "attention/quad_reduce.cuh"
#include "attention/softmax_state.hpp"
#include "ptx/math.hpp"
#include "ptx/mma_sm80.hpp"

namespace flashcore::sm80 {

// Where a thread's accumulator element (mt, nt, i) sits in the (query, key) plane.
struct FragmentCoords {
  int row0;  // query index (in the sequence) of this thread's row g of m-tile 0
  int col0;  // key index of this thread's column 2t of n-tile 0

  FC_DEVICE int row(int mt, int i) const { return row0 + mt * 16 + 8 * (i >> 1); }
  FC_DEVICE int col(int nt, int i) const { return col0 + nt * 8 + (i & 1); }
};

// Softcap / ALiBi (only when the call has them) and, on tiles that straddle a mask boundary,
// -inf for invisible (query, key) pairs. kMasked is false on tiles the mask covers entirely.
// kSfuTanh: the softcap's tanh from the SFU (ScoreTransform::apply_fast with scale_over_softcap,
// transform.dot_softcap()'s; 16-bit inputs), else tanhf.
template <bool kMasked, bool kSfuTanh, int kMTiles, int kNTiles>
FC_DEVICE void transform_and_mask(float (&s)[kMTiles][kNTiles][4], const FragmentCoords& at,
                                  const attn::ScoreTransform& transform, float scale_over_softcap, bool score_mod,
                                  const attn::VisibilityMask& mask) {
  if (score_mod) {
#pragma unroll
    for (int mt = 0; mt < kMTiles; ++mt)
#pragma unroll
      for (int nt = 0; nt < kNTiles; ++nt)
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          const float score = kSfuTanh ? transform.apply_fast(s[mt][nt][i], at.row(mt, i), at.col(nt, i), scale_over_softcap)
                                       : transform.apply(s[mt][nt][i], at.row(mt, i), at.col(nt, i));
          s[mt][nt][i] = score * attn::kLog2e;
        }
  }
  if constexpr (kMasked) {
    // Diagonal form of the mask (VisibilityMask::min_diagonal): key col is visible to query row iff
    // min_diag <= col - row <= max_diag and col < seqlen_k. Per-row first/last keys would be
    // loop-invariant, and the compiler kept all of them (8 on two-m-tile warps) in registers across
    // the KV loop; here only the two per-sequence diagonals are, and col - row is formed per element.
    const int min_diag = mask.min_diagonal();
    const int max_diag = mask.max_diagonal();
#pragma unroll
    for (int mt = 0; mt < kMTiles; ++mt)
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const int row = at.row(mt, 2 * half);
#pragma unroll
        for (int nt = 0; nt < kNTiles; ++nt)
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            const int col = at.col(nt, e);
            if (!attn::VisibilityMask::in_band(row, col, min_diag, max_diag, mask.seqlen_k)) {
              s[mt][nt][2 * half + e] = -INFINITY;
            }
          }
      }
  }
}

// The online softmax of a warp's rows (attention/softmax_state.hpp): per row, the running max of
// u * log2_multiplier (u: the softmax units above) and this thread's part of the sum.
template <int kMTiles, int kNTiles, int kOutNTiles>
struct OnlineSoftmax {
  attn::SoftmaxState row[kMTiles][2];

  FC_DEVICE void init() {
#pragma unroll
    for (int mt = 0; mt < kMTiles; ++mt) row[mt][0] = row[mt][1] = attn::SoftmaxState{};
  }

  // Folds one KV block into the running statistics and turns s into unnormalized probabilities in
  // place. The running max only moves when the block's max exceeds it by more than
  // attn::kRescaleThresholdLog2, so most blocks skip rescaling acc_o; a warp rescales only when one
  // of its rows moved (by exp2(old max - new max), 1 for the rows that did not).
  FC_DEVICE void update(float (&s)[kMTiles][kNTiles][4], float (&acc_o)[kMTiles][kOutNTiles][4],
                        float log2_multiplier) {
    float correction[kMTiles][2];
    bool any_moved = false;
#pragma unroll
    for (int mt = 0; mt < kMTiles; ++mt)
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        float block_max = s[mt][0][2 * r];
#pragma unroll
        for (int nt = 0; nt < kNTiles; ++nt)
          block_max = fmaxf(block_max, fmaxf(s[mt][nt][2 * r], s[mt][nt][2 * r + 1]));
        // -inf: nothing visible in this block; a first visible key gives correction 0.
        correction[mt][r] = row[mt][r].rescale_for_block(attn::quad_max(block_max) * log2_multiplier);
        any_moved = any_moved || correction[mt][r] != 1.0f;
      }
    if (__any_sync(0xffffffffu, any_moved)) {
#pragma unroll
      for (int mt = 0; mt < kMTiles; ++mt)
#pragma unroll
        for (int r = 0; r < 2; ++r)
#pragma unroll
          for (int d = 0; d < kOutNTiles; ++d) {
            acc_o[mt][d][2 * r] *= correction[mt][r];
            acc_o[mt][d][2 * r + 1] *= correction[mt][r];
          }
    }
#pragma unroll
    for (int mt = 0; mt < kMTiles; ++mt)
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        const float max_log2 = row[mt][r].max_log2;
        float sum = row[mt][r].sum;
#pragma unroll
        for (int nt = 0; nt < kNTiles; ++nt)
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            const float p = ptx::exp2_approx(fmaf(s[mt][nt][2 * r + e], log2_multiplier, -max_log2));
            s[mt][nt][2 * r + e] = p;
            sum += p;
          }
        row[mt][r].sum = sum;
      }
  }

  // Normalizes acc_o by the row sums and returns each row's natural-log LSE in lse[mt][r]
  // (-inf and o = 0 for a row that saw no visible key; NaN stays NaN).
  FC_DEVICE void finalize(float (&acc_o)[kMTiles][kOutNTiles][4], float (&lse)[kMTiles][2]) const {
#pragma unroll
    for (int mt = 0; mt < kMTiles; ++mt)
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        attn::SoftmaxState total = row[mt][r];
        total.sum = attn::quad_sum(row[mt][r].sum);
        const float inv_sum = total.inv_sum();
#pragma unroll
        for (int d = 0; d < kOutNTiles; ++d) {
          acc_o[mt][d][2 * r] *= inv_sum;
          acc_o[mt][d][2 * r + 1] *= inv_sum;
        }
        lse[mt][r] = total.lse();
      }
  }
};

}  // namespace flashcore::sm80
