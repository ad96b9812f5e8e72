// Helpers shared by the fp64 CPU reference's forward and backward (cpu_reference.cpp,
// cpu_reference_backward.cpp).
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>

#include "common/dtype.hpp"
#include "flashcore/flashcore.hpp"

namespace flashcore::reference {

inline constexpr double kNegInf = -std::numeric_limits<double>::infinity();

// Element offset of token `token` (sequence-relative row plus the varlen start), head `head` of a
// tensor with the given strides. Varlen tensors have no batch axis: batch strides are ignored.
inline int64_t token_offset(const AttentionParams& p, int64_t batch_stride, int64_t seq_stride,
                     int64_t head_stride, int b, int64_t token, int head) {
  const int64_t batch_part = p.is_varlen() ? 0 : int64_t(b) * batch_stride;
  return batch_part + token * seq_stride + int64_t(head) * head_stride;
}

// Four partial sums so the compiler can keep several multiply-adds in flight (double addition is
// not reassociated without them).
inline double dot(const double* a, const double* b, int n) {
  double acc0 = 0, acc1 = 0, acc2 = 0, acc3 = 0;
  int d = 0;
  for (; d + 4 <= n; d += 4) {
    acc0 += a[d] * b[d];
    acc1 += a[d + 1] * b[d + 1];
    acc2 += a[d + 2] * b[d + 2];
    acc3 += a[d + 3] * b[d + 3];
  }
  for (; d < n; ++d) acc0 += a[d] * b[d];
  return (acc0 + acc1) + (acc2 + acc3);
}

// Rounds a double to float toward zero and sets the last bit when inexact ("round to odd"), so a
// second rounding to fp16/bf16 (11 and 8 significant bits, far fewer than float's 24) equals one
// correct rounding of the double: the output is rounded once, as a kernel rounding fp32 would be.
inline float round_to_odd_float(double value) {
  const float nearest = float(value);
  if (double(nearest) == value || std::isnan(value)) return nearest;
  float toward_zero = nearest;
  if (std::fabs(double(nearest)) > std::fabs(value)) toward_zero = std::nextafter(nearest, 0.0f);
  return bits_to_float(float_to_bits(toward_zero) | 1u);
}

inline void store_rounded(void* base, int64_t index, double value, DType dtype) {
  if (dtype == DType::kFloat32) {
    static_cast<float*>(base)[index] = float(value);
  } else {
    store_from_float(base, index, round_to_odd_float(value), dtype);
  }
}


}  // namespace flashcore::reference
