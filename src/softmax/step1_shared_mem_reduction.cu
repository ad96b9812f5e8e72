// Ladder step 1 — the textbook kernel: one block per row, three passes over the row (max, sum of
// exp, write), each reduction a shared-memory tree (log2(threads) rounds, a barrier per round).
// Scalar loads. Correct for any sizes and alignment; the baseline every later step is measured
// against.
#include "softmax/softmax_common.cuh"

namespace flashcore::softmax {
namespace {

constexpr int kThreads = 256;  // a power of two: the tree halves it each round

// All threads end with op over every thread's value. scratch: kThreads floats.
template <typename Op>
__device__ float tree_allreduce(float value, Op op, float* scratch) {
  scratch[threadIdx.x] = value;
  __syncthreads();
  for (int active = kThreads / 2; active > 0; active /= 2) {
    if (threadIdx.x < active) scratch[threadIdx.x] = op(scratch[threadIdx.x], scratch[threadIdx.x + active]);
    __syncthreads();  // this round's writes visible before the next round reads them
  }
  const float result = scratch[0];
  __syncthreads();  // everyone has read the result before scratch is reused
  return result;
}

template <typename T>
__global__ void __launch_bounds__(kThreads) shared_mem_reduction_kernel(const T* x, T* y, float* lse,
                                                                        int64_t rows, int64_t cols) {
  __shared__ float scratch[kThreads];
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const T* x_row = x + row * cols;
    T* y_row = y + row * cols;

    float row_max = -INFINITY;
    for (int64_t col = threadIdx.x; col < cols; col += kThreads) row_max = max_nan(row_max, to_float(x_row[col]));
    row_max = tree_allreduce(row_max, MaxOp{}, scratch);

    float row_sum = 0.0f;
    for (int64_t col = threadIdx.x; col < cols; col += kThreads) row_sum += fast_exp(to_float(x_row[col]) - row_max);
    row_sum = tree_allreduce(row_sum, SumOp{}, scratch);

    const float inv_row_sum = 1.0f / row_sum;
    for (int64_t col = threadIdx.x; col < cols; col += kThreads) {
      y_row[col] = from_float<T>(probability(to_float(x_row[col]), row_max, inv_row_sum));
    }
    if (lse != nullptr && threadIdx.x == 0) lse[row] = lse_from_stats(row_max, row_sum);
  }
}

}  // namespace

Status launch_shared_mem_reduction(const SoftmaxProblem& p) {
  return dispatch_dtype(p.dtype, [&](auto tag) {
    using T = decltype(tag);
    shared_mem_reduction_kernel<T><<<grid_for(p.rows), kThreads, 0, p.stream>>>(
        static_cast<const T*>(p.x), static_cast<T*>(p.y), p.lse, p.rows, p.cols);
    FC_CHECK_LAUNCH("shared_mem_reduction_kernel");
    return Status::Ok();
  });
}

}  // namespace flashcore::softmax
