// The three-pass block-per-row kernel of ladder steps 2 and 3: max pass, sum-of-exp pass, write
// pass, each reduction through warp shuffles plus one shared slot per warp (block_allreduce).
// kVec = 1 is step 2 (scalar loads); kVec = 16 / sizeof(T) is step 3 (16-byte loads and stores).
#pragma once

#include "softmax/softmax_common.cuh"

namespace flashcore::softmax {

inline constexpr int kThreePassThreads = 256;

// One row, three passes over `src_row` (max, sum of exp, write to y_row), kThreads threads of the
// block sharing it. src_row is x's row in global memory (steps 2, 3) or the row staged in shared
// memory (step 8). lse_slot may be null.
template <typename T, int kVec, int kThreads>
FC_DEVICE void three_pass_row(const T* src_row, T* y_row, float* lse_slot, int64_t vecs_per_row, float* scratch) {
  float values[kVec];
  float row_max = -INFINITY;
  // The stride is the compile-time block size (not blockDim.x) so nvcc unrolls the loops and
  // keeps several loads in flight per thread; with blockDim.x it did not (docs/softmax.md).
  for (int64_t v = threadIdx.x; v < vecs_per_row; v += kThreads) {
    load_pack<T, kVec>(src_row + v * kVec, values);
#pragma unroll
    for (int i = 0; i < kVec; ++i) row_max = max_nan(row_max, values[i]);
  }
  row_max = block_allreduce(row_max, MaxOp{}, scratch);

  float row_sum = 0.0f;
  for (int64_t v = threadIdx.x; v < vecs_per_row; v += kThreads) {
    load_pack<T, kVec>(src_row + v * kVec, values);
#pragma unroll
    for (int i = 0; i < kVec; ++i) row_sum += fast_exp(values[i] - row_max);
  }
  // The max is the row's own, so no -inf guard is needed: only an all -inf row has
  // row_max = -inf, and its NaN sum gives the NaN row torch gives (lse_from_stats still says -inf).
  row_sum = block_allreduce(row_sum, SumOp{}, scratch);

  const float inv_row_sum = 1.0f / row_sum;
  for (int64_t v = threadIdx.x; v < vecs_per_row; v += kThreads) {
    load_pack<T, kVec>(src_row + v * kVec, values);
#pragma unroll
    for (int i = 0; i < kVec; ++i) values[i] = probability(values[i], row_max, inv_row_sum);
    store_pack<T, kVec>(y_row + v * kVec, values);
  }
  if (lse_slot != nullptr && threadIdx.x == 0) *lse_slot = lse_from_stats(row_max, row_sum);
}

template <typename T, int kVec>
__global__ void __launch_bounds__(kThreePassThreads) three_pass_kernel(const T* x, T* y, float* lse,
                                                                       int64_t rows, int64_t cols) {
  __shared__ float scratch[kWarpSize];
  const int64_t vecs_per_row = cols / kVec;  // the launcher guarantees cols % kVec == 0
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    three_pass_row<T, kVec, kThreePassThreads>(x + row * cols, y + row * cols, lse == nullptr ? nullptr : lse + row,
                                               vecs_per_row, scratch);
  }
}

template <typename T, int kVec>
Status launch_three_pass(const SoftmaxProblem& p, const char* name) {
  three_pass_kernel<T, kVec><<<grid_for(p.rows), kThreePassThreads, 0, p.stream>>>(
      static_cast<const T*>(p.x), static_cast<T*>(p.y), p.lse, p.rows, p.cols);
  FC_CHECK_LAUNCH(name);
  return Status::Ok();
}

}  // namespace flashcore::softmax
