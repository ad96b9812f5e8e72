// Online softmax on a consumer thread's slice of the S = Q K^T accumulator.
//
// wgmma accumulator layout (m64nN, tensor-core notes §2): thread (warp w, lane l, g = l/4, t = l%4)
// holds acc[i] at row 16w + g + 8*((i>>1)&1), column 8*(i>>2) + 2t + (i&1). So each thread owns two
// rows (local row 0 and 1) and the 4 threads of a quad share them: row reductions are a thread-local
// pass plus two quad shuffles.
//
// Scores stay in dot units; the scale and log2(e) are folded into one FFMA before exp2 (params.hpp).
#pragma once

#include <cfloat>
#include <cmath>

#include "attention/mask.hpp"
#include "attention/quad_reduce.cuh"
#include "attention/rescale.hpp"
#include "common/host_device.hpp"
#include "ptx/math.hpp"

namespace flashcore::sm90 {

FC_DEVICE int acc_row(int i) { return (i >> 1) & 1; }                  // local row 0/1 of acc[i]
FC_DEVICE int acc_col(int i, int quad_lane) { return 8 * (i >> 2) + 2 * quad_lane + (i & 1); }

// dot <- softcap_over_scale * tanh(dot * scale_over_softcap): ScoreTransform's softcap in dot units.
template <int kAcc>
FC_DEVICE void apply_softcap(float* s, float softcap_over_scale, float scale_over_softcap) {
#pragma unroll
  for (int i = 0; i < kAcc; ++i) s[i] = softcap_over_scale * tanhf(s[i] * scale_over_softcap);
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

// The running max of a row moves only when a block's max exceeds it by more than
// attn::kRescaleThresholdLog2 (the sm80 path's rule; attention/rescale.hpp says why it is exact).
// With the max moving on every increase, a warp's 16 rows rescaled O in about 30 % of the blocks at
// d128 S=16k: 64 FMULs per thread between P V's completion and the next GEMM issue. H200, same-call
// A/B against that rule (bench/results/2026-11-24-h200-session10, built at 0680439 with the value
// overridable): d128 +1-2 % (S=16k fp16 627 -> 638, bf16 646 -> 660, causal 582 -> 594-599), d256
// S=8k +1 %.

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

struct OnlineSoftmax {
  // Before a row's first visible key its running max is this finite stand-in for -inf: the
  // threshold test stays false for an all-invisible block (-inf), exp2(dot * scale_log2 - max) of an
  // invisible dot is exp2(-inf) = 0 (with -inf itself it would be -inf + inf = NaN), and the factor
  // of the first move is exp2(kNoKeyYet - max) = 0. So no per-block test for "no key yet".
  static constexpr float kNoKeyYet = -FLT_MAX;
  // 2^attn::kRescaleThresholdLog2: the largest p a block may leave without moving the max.
  static_assert(attn::kRescaleThresholdLog2 == float(int(attn::kRescaleThresholdLog2)), "a whole power of two");
  static constexpr float kRescaleThresholdP = float(1 << int(attn::kRescaleThresholdLog2));
  float max_log2[2];  // running (possibly stale, see above) max of each row's visible dot * scale_log2
  float row_sum[2];   // this thread's partial sum of exp2(dot * scale_log2 - max_log2)

  FC_DEVICE void init() {
    max_log2[0] = max_log2[1] = kNoKeyYet;
    row_sum[0] = row_sum[1] = 0.0f;
  }

  // Folds one block of scores in: moves the running max if the block's exceeds it by more than
  // attn::kRescaleThresholdLog2, turns s into unnormalized probabilities in place, and returns in
  // `o_factor` what the rows of O (and the sums) must be multiplied by (1 where the max stayed).
  // Needs scale_log2 > 0 (sm90_supports() sends other scales to the sm80 path): then the max of the
  // scaled dots is the scaled max of the dots. The max is kept in exp2 units so that a block costs
  // one multiply per row for it.
  template <int kAcc>
  FC_DEVICE void update(float* s, float scale_log2, float (&o_factor)[2]) {
    float block_max[2];
    thread_row_max<kAcc>(s, block_max);
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const float block_log2 = attn::quad_max(block_max[r]) * scale_log2;  // -inf: nothing visible
      const bool moved = block_log2 > max_log2[r] + attn::kRescaleThresholdLog2;
      o_factor[r] = moved ? ptx::exp2_approx(max_log2[r] - block_log2) : 1.0f;
      if (moved) max_log2[r] = block_log2;
      row_sum[r] *= o_factor[r];
    }
    exp2_rows<kAcc>(s, scale_log2, max_log2, row_sum);
  }

  // ---- The stale-max fast path (Consumer::overlap_step; tile_config.hpp, kStaleMaxSoftmax) ----------
  // Exact update() spends most of its instructions on the block max (an FMNMX chain over the
  // thread's scores, two quad shuffles per row, the threshold test), yet after a row's first blocks
  // the max almost never moves. So a fully visible block is first exponentiated against the running
  // max as it stands, and only a warp in which that went too far settles the block afterwards:
  //   1. exp_against_running_max: p = exp2(dot * scale_log2 - max), summed per row. A thread whose
  //      block sums are at most kStaleSumLimit has every p at most that: fp32 sums and 16-bit P keep
  //      their relative precision there, as under update()'s threshold. If every thread of the warp
  //      is within it, commit_block() adds the sums: no max move, no O rescale.
  //   2. Otherwise settle_by_power_of_two: a row whose largest p exceeds 2^kRescaleThresholdLog2 (the
  //      update() rule) moves its max up by e = floor(log2(max p)), and its p, its sums and its O
  //      rows are multiplied by 2^-e. A power of two changes no bit but the exponent, so this is the
  //      block exact update() would have made with the max e higher (p of the row's largest score
  //      in [1, 2) instead of exactly 1).
  //   3. If some row of the warp has a p above kLargestSettledP (a score more than 64 log2 units
  //      above the max: 2^-e would leave fp32's normal range beyond 126, and from 128 on p is +inf),
  //      no key yet (max kNoKeyYet: every visible p is +inf) or only NaN, the warp recomputes its
  //      scores (Consumer::recompute_scores) and runs update().
  // NaN scores make their row's sums NaN (as in update()), so a NaN row never passes step 1.
  static constexpr float kStaleSumLimit = 1024.0f;
  static constexpr float kLargestSettledP = 0x1p64f;

  template <int kAcc>
  FC_DEVICE bool exp_against_running_max(float* s, float scale_log2, float (&block_sum)[2]) const {
    block_sum[0] = block_sum[1] = 0.0f;
    exp2_rows<kAcc>(s, scale_log2, max_log2, block_sum);
    return block_sum[0] <= kStaleSumLimit && block_sum[1] <= kStaleSumLimit;  // false for NaN
  }

  FC_DEVICE void commit_block(const float (&block_sum)[2]) {
    row_sum[0] += block_sum[0];
    row_sum[1] += block_sum[1];
  }

  // Step 2 for a block that failed step 1 somewhere in the warp (every lane calls it). Returns false,
  // having changed nothing, when the warp must take step 3; otherwise the block is committed and
  // `o_factor` holds what O's rows must be multiplied by.
  template <int kAcc>
  FC_DEVICE bool settle_by_power_of_two(float* s, const float (&block_sum)[2], float (&o_factor)[2]) {
    float p_max[2];
    thread_row_max<kAcc>(s, p_max);
    p_max[0] = attn::quad_max(p_max[0]);
    p_max[1] = attn::quad_max(p_max[1]);
    // !(x <= limit): +inf, and NaN (fmaxf drops NaN unless every p of the row is NaN).
    if (__any_sync(0xffffffffu, !(p_max[0] <= kLargestSettledP) || !(p_max[1] <= kLargestSettledP))) return false;
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const bool moved = p_max[r] > kRescaleThresholdP;
      // floor(log2(p_max)) from the exponent field (p_max is normal here), and 2^-e built the same way
      const int e = moved ? (__float_as_int(p_max[r]) >> 23) - 127 : 0;
      o_factor[r] = __int_as_float((127 - e) << 23);
      max_log2[r] += (float)e;
      row_sum[r] = (row_sum[r] + block_sum[r]) * o_factor[r];
    }
    if (o_factor[0] != 1.0f || o_factor[1] != 1.0f) {
#pragma unroll
      for (int i = 0; i < kAcc; ++i) s[i] *= o_factor[acc_row(i)];
    }
    return true;
  }

  // Totals over the quad; returns per row 1/sum (0 for a row with no visible key) and the natural
  // log-sum-exp of the scaled scores (-inf for such a row). A row with a visible key has sum >= 1
  // (the term of the key that set its max), so a zero sum means none; a NaN sum stays NaN.
  FC_DEVICE void finalize(float (&inv_sum)[2], float (&lse)[2]) {
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const float sum = attn::quad_sum(row_sum[r]);
      const bool empty = sum == 0.0f;
      inv_sum[r] = empty ? 0.0f : 1.0f / sum;
      lse[r] = empty ? -INFINITY : max_log2[r] * attn::kLn2 + logf(sum);
    }
  }
};

// O rows *= factor (O's accumulator has the same row mapping as S's).
template <int kAcc>
FC_DEVICE void scale_rows(float* o, const float (&factor)[2]) {
#pragma unroll
  for (int i = 0; i < kAcc; ++i) o[i] *= factor[acc_row(i)];
}

}  // namespace flashcore::sm90
