// merge_attention_states, internals shared by the API (merge_states.cpp: validation, the CPU
// implementation) and the kernel (merge_states.cu): the per-row math, which both sides run
// identically so that host and device results agree bit for bit, and the launch.
#pragma once

#include <cmath>
#include <cstdint>

#include <cuda_runtime_api.h>

#include "common/host_device.hpp"
#include "flashcore/flashcore.hpp"

namespace flashcore::merge {

// What one row (b, s, h) of the merge multiplies o_a and o_b by.
struct RowWeights {
  float w_a = 0.0f;
  float w_b = 0.0f;
};

// w_x = exp(lse_x - lse) with lse = log(exp(lse_a) + exp(lse_b)): with e = exp(lo - hi) (hi, lo the
// larger and smaller of lse_a, lse_b), w_hi = 1 / (1 + e) and w_lo = e / (1 + e). A side whose lse
// is -inf or +inf is empty (weight 0; both empty: both 0). A NaN lse makes both weights NaN.
// The scalars are formed in fp64 and rounded once to fp32: the device's expf/logf are not correctly
// rounded, its fp64 exp/log1p are within an ulp of fp64, so the rounded fp32 values are the same on
// the host and on the device (the per-element blend below is fp32 on both).
FC_HOST_DEVICE RowWeights row_weights(float lse_a, float lse_b) {
  if (lse_a != lse_a || lse_b != lse_b) return {NAN, NAN};
  const bool a_empty = fabsf(lse_a) == INFINITY;
  const bool b_empty = fabsf(lse_b) == INFINITY;
  if (a_empty || b_empty) return {a_empty ? 0.0f : 1.0f, b_empty ? 0.0f : 1.0f};
  const bool a_hi = lse_a >= lse_b;
  const double e = ::exp(a_hi ? double(lse_b) - lse_a : double(lse_a) - lse_b);
  const double sum = 1.0 + e;
  const float w_hi = float(1.0 / sum), w_lo = float(e / sum);
  return a_hi ? RowWeights{w_hi, w_lo} : RowWeights{w_lo, w_hi};
}

// lse = log(exp(lse_a) + exp(lse_b)) = hi + log1p(exp(lo - hi)) in fp64, rounded once; an empty side
// (-inf or +inf) adds nothing, both empty give -inf, a NaN gives NaN.
FC_HOST_DEVICE float row_lse(float lse_a, float lse_b) {
  if (lse_a != lse_a || lse_b != lse_b) return NAN;
  const bool a_empty = fabsf(lse_a) == INFINITY;
  const bool b_empty = fabsf(lse_b) == INFINITY;
  if (a_empty && b_empty) return -INFINITY;
  if (a_empty) return lse_b;
  if (b_empty) return lse_a;
  const double hi = lse_a >= lse_b ? lse_a : lse_b;
  const double lo = lse_a >= lse_b ? lse_b : lse_a;
  return float(hi + ::log1p(::exp(lo - hi)));
}

// w_a * a + w_b * b with one rounding per operation (an explicit fma, so the compilers' contraction
// choices cannot make host and device differ). A weight of 0 still multiplies: NaN (or Inf) in an
// empty side's o gives NaN, never dropped.
FC_HOST_DEVICE float blend(float w_a, float a, float w_b, float b) {
#if defined(__CUDA_ARCH__)
  return __fmaf_rn(w_a, a, __fmul_rn(w_b, b));
#else
  return std::fma(w_a, a, w_b * b);
#endif
}

// 16-byte vector accesses are possible: head_dim * element size is a multiple of 16 and every
// base pointer and stride of o_a, o_b, o allows them (a stride of a dimension of extent 1 is free).
bool can_use_vector_loads(const MergeStatesParams& p);

// Runs the merge on `stream` (device pointers; `p` valid, at least one row).
Status launch_merge_states(const MergeStatesParams& p, cudaStream_t stream);

}  // namespace flashcore::merge
