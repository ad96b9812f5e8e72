// The online softmax of one query row, as every path keeps it (sm80 and sm90 per row fragment, the
// stream-K partials, and what split-KV and ring attention merge), in log2 units:
//   max_log2  the running max of score * log2(e) over the keys seen so far (possibly stale: below)
//   sum       sum over those keys of exp2(score * log2(e) - max_log2)
// so that lse = (max_log2 + log2(sum)) * ln 2 and o = sum_j p_j v_j / sum. In the kernels `sum` is
// one thread's part of the row until the quad's parts are added (attention/quad_reduce.cuh).
//
// The running max moves only when a block's max exceeds it by more than kRescaleThresholdLog2.
// Until then p = exp2(score - stale max) <= 2^kRescaleThresholdLog2, which fp32 sums and 16-bit P
// hold with unchanged relative precision, and the lse formed from the same max stays exact; so after
// a row's first block the accumulated O is almost never rescaled. Why 4, not 8: with 8 a d32 fp16
// ALiBi case of the sm80 sweep exceeded 2x the naive baseline's max-abs error (docs/design/sm80.md).
//
// Before a row's first visible key its max is kNoKeyYet, a finite stand-in for -inf: the threshold
// test stays false for an all-invisible block (-inf), exp2(score - kNoKeyYet) of an invisible score is
// exp2(-inf) = 0 (with -inf itself it would be -inf + inf = NaN), and the factor of the first move is
// exp2(kNoKeyYet - max) = 0. So no per-block test for "no key yet" is needed.
#pragma once

#include <cfloat>
#include <cmath>

#include "attention/constants.hpp"
#include "common/host_device.hpp"
#if defined(__CUDACC__)
#include "ptx/math.hpp"
#endif

namespace flashcore::attn {

inline constexpr float kRescaleThresholdLog2 = 4.0f;

// exp2 as the kernels compute it (ex2.approx: 2 ulp, -inf -> 0), and std::exp2 on the host.
FC_HOST_DEVICE float softmax_exp2(float x) {
#if defined(__CUDA_ARCH__)
  return ptx::exp2_approx(x);
#else
  return std::exp2(x);
#endif
}

struct SoftmaxState {
  static constexpr float kNoKeyYet = -FLT_MAX;
  float max_log2 = kNoKeyYet;
  float sum = 0.0f;

  // A block of keys whose max score * log2(e) is block_max_log2 (-inf: none visible) is about to
  // be added: moves the max if the block's exceeds it by more than kRescaleThresholdLog2 and
  // rescales the sum. Returns what the row's accumulated O must be multiplied by (1: max kept).
  FC_HOST_DEVICE float rescale_for_block(float block_max_log2) {
    const bool moved = block_max_log2 > max_log2 + kRescaleThresholdLog2;
    const float factor = moved ? softmax_exp2(max_log2 - block_max_log2) : 1.0f;
    if (moved) max_log2 = block_max_log2;
    sum *= factor;
    return factor;
  }

  // This state and `other`, over disjoint sets of keys, combined exactly (both moved to the larger
  // max). own_factor / other_factor: what each side's O must be multiplied by before adding them.
  // Empty sides (kNoKeyYet, sum 0) contribute nothing; two empty sides stay empty.
  FC_HOST_DEVICE void merge(const SoftmaxState& other, float& own_factor, float& other_factor) {
    const float new_max = fmaxf(max_log2, other.max_log2);
    own_factor = softmax_exp2(max_log2 - new_max);
    other_factor = softmax_exp2(other.max_log2 - new_max);
    sum = sum * own_factor + other.sum * other_factor;
    max_log2 = new_max;
  }

  // A row with a visible key has sum >= 1 (the term of the key that set its max), so a zero sum
  // means none: o = 0 and lse = -inf there. A NaN sum (NaN scores) stays NaN in both.
  FC_HOST_DEVICE bool empty() const { return sum == 0.0f; }
  FC_HOST_DEVICE float inv_sum() const { return empty() ? 0.0f : 1.0f / sum; }
  // Natural-log log-sum-exp of the row's scores.
  FC_HOST_DEVICE float lse() const { return empty() ? -INFINITY : max_log2 * kLn2 + logf(sum); }
};

}  // namespace flashcore::attn
