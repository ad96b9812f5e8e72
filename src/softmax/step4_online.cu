// Ladder step 4 — online softmax: the max pass and the sum pass of step 3 become one pass that
// keeps running statistics (max, sum of exp rescaled whenever the max grows; Milakov & Gimelshein,
// "Online normalizer calculation for softmax", 2018). Two reads of each row instead of three
// (the second usually hits L2) and one block reduction of (max, sum) pairs instead of two.
// Uses 16-byte vectors when the rows are aligned, scalar accesses otherwise.
#include "softmax/softmax_common.cuh"

namespace flashcore::softmax {
namespace {

constexpr int kThreads = 256;

template <typename T, int kVec>
__global__ void __launch_bounds__(kThreads) online_kernel(const T* x, T* y, float* lse, int64_t rows,
                                                          int64_t cols) {
  __shared__ RowStats scratch[kWarpSize];
  const int64_t vecs_per_row = cols / kVec;  // the launcher guarantees cols % kVec == 0
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const T* x_row = x + row * cols;
    T* y_row = y + row * cols;
    float values[kVec];

    RowStats stats = empty_stats();
    for (int64_t v = threadIdx.x; v < vecs_per_row; v += kThreads) {
      load_pack<T, kVec>(x_row + v * kVec, values);
      accumulate_stats(stats, values);
    }
    stats = block_allreduce(stats, MergeOp{}, scratch);

    const float inv_row_sum = 1.0f / stats.sum;
    for (int64_t v = threadIdx.x; v < vecs_per_row; v += kThreads) {
      load_pack<T, kVec>(x_row + v * kVec, values);
#pragma unroll
      for (int i = 0; i < kVec; ++i) values[i] = probability(values[i], stats.max, inv_row_sum);
      store_pack<T, kVec>(y_row + v * kVec, values);
    }
    if (lse != nullptr && threadIdx.x == 0) lse[row] = lse_from_stats(stats.max, stats.sum);
  }
}

template <typename T, int kVec>
Status launch_online_kernel(const SoftmaxProblem& p) {
  online_kernel<T, kVec><<<grid_for(p.rows), kThreads, 0, p.stream>>>(
      static_cast<const T*>(p.x), static_cast<T*>(p.y), p.lse, p.rows, p.cols);
  FC_CHECK_LAUNCH("online_kernel");
  return Status::Ok();
}

}  // namespace

Status launch_online(const SoftmaxProblem& p) {
  const bool vectorized = rows_are_vector_aligned(p);
  return dispatch_dtype(p.dtype, [&](auto tag) {
    using T = decltype(tag);
    return vectorized ? launch_online_kernel<T, kFullVec<T>>(p) : launch_online_kernel<T, 1>(p);
  });
}

}  // namespace flashcore::softmax
