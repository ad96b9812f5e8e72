// The forward's online softmax on a consumer thread's slice of the S = Q K^T accumulator (fragment
// layout: sm90/common/fragment.cuh). Scores stay in dot units; the scale and log2(e) are folded into
// one FFMA before exp2 (params.hpp).
#pragma once

#include <cmath>

#include "attention/mask.hpp"
#include "attention/quad_reduce.cuh"
#include "attention/softmax_state.hpp"
#include "common/host_device.hpp"
#include "ptx/math.hpp"
#include "sm90/common/fragment.cuh"

namespace flashcore::sm90 {

// The online softmax of a consumer thread's two rows: per row an attn::SoftmaxState (running max in
// exp2 units of the scaled dots, this thread's part of the sum), held as two arrays so that
// exp2_rows and the stale-max steps work on both rows at once; every rule of the state (threshold,
// no key yet, merge, lse) is attn::SoftmaxState's.
struct OnlineSoftmax {
  static constexpr float kNoKeyYet = attn::SoftmaxState::kNoKeyYet;
  // 2^attn::kRescaleThresholdLog2: the largest p a block may leave without moving the max.
  static_assert(attn::kRescaleThresholdLog2 == float(int(attn::kRescaleThresholdLog2)), "a whole power of two");
  static constexpr float kRescaleThresholdP = float(1 << int(attn::kRescaleThresholdLog2));
  float max_log2[2];  // SoftmaxState::max_log2 of each row (possibly stale)
  float row_sum[2];   // SoftmaxState::sum of each row: this thread's part

  FC_DEVICE void init() {
    max_log2[0] = max_log2[1] = kNoKeyYet;
    row_sum[0] = row_sum[1] = 0.0f;
  }
  FC_DEVICE attn::SoftmaxState state(int r) const { return {max_log2[r], row_sum[r]}; }
  FC_DEVICE void set_state(int r, const attn::SoftmaxState& st) { max_log2[r] = st.max_log2, row_sum[r] = st.sum; }

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
      attn::SoftmaxState row = state(r);
      o_factor[r] = row.rescale_for_block(attn::quad_max(block_max[r]) * scale_log2);  // -inf: nothing visible
      set_state(r, row);
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
  FC_DEVICE void finalize(float (&inv_sum)[2], float (&lse)[2]) const {
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      attn::SoftmaxState total = state(r);
      total.sum = attn::quad_sum(row_sum[r]);
      inv_sum[r] = total.inv_sum();
      lse[r] = total.lse();
    }
  }
};

}  // namespace flashcore::sm90
