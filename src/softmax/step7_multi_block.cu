// Ladder step 7 — very long rows, or too few rows to fill the GPU: each row is cut into chunks and
// every (row, chunk) pair gets its own block. Kernel 1 writes the (max, sum) of each chunk to a
// small workspace; kernel 2 merges the partials of its row (merge_stats, the same rescaling as the
// online step) and writes its chunk. Two reads of x, like step 4, but all SMs work even on one row.
#include "softmax/softmax_common.cuh"

namespace flashcore::softmax {
namespace {

constexpr int kThreads = 256;
// A chunk is at least this many elements (enough work per block to amortize its launch and the
// partial merge), and we aim for this many blocks per SM in total.
constexpr int64_t kMinChunkElems = 8192;
constexpr int64_t kTargetBlocksPerSm = 4;

struct ChunkLayout {
  int64_t chunks_per_row;
  int64_t chunk_elems;  // a multiple of the vector width; the last chunk of a row may be shorter
};

template <typename T, int kVec>
__global__ void __launch_bounds__(kThreads) chunk_stats_kernel(const T* x, RowStats* partials, int64_t rows,
                                                               int64_t cols, ChunkLayout layout) {
  __shared__ RowStats scratch[kWarpSize];
  const int64_t pairs = rows * layout.chunks_per_row;
  for (int64_t pair = blockIdx.x; pair < pairs; pair += gridDim.x) {
    const int64_t row = pair / layout.chunks_per_row;
    const int64_t chunk_begin = (pair % layout.chunks_per_row) * layout.chunk_elems;
    const int64_t chunk_end = min(chunk_begin + layout.chunk_elems, cols);
    const T* x_row = x + row * cols;
    float values[kVec];
    RowStats stats = empty_stats();
    for (int64_t col = chunk_begin + threadIdx.x * kVec; col < chunk_end; col += kThreads * kVec) {
      load_pack<T, kVec>(x_row + col, values);
      accumulate_stats(stats, values);
    }
    stats = block_allreduce(stats, MergeOp{}, scratch);
    if (threadIdx.x == 0) partials[pair] = stats;
  }
}

template <typename T, int kVec>
__global__ void __launch_bounds__(kThreads) chunk_write_kernel(const T* x, T* y, float* lse,
                                                               const RowStats* partials, int64_t rows,
                                                               int64_t cols, ChunkLayout layout) {
  __shared__ RowStats scratch[kWarpSize];
  const int64_t pairs = rows * layout.chunks_per_row;
  for (int64_t block_pair = blockIdx.x; block_pair < pairs; block_pair += gridDim.x) {
    // Last chunk first: blocks start roughly in blockIdx order, so this kernel begins with the
    // chunks kernel 1 read last, which are the ones still in L2.
    const int64_t pair = pairs - 1 - block_pair;
    const int64_t row = pair / layout.chunks_per_row;
    const int64_t chunk = pair % layout.chunks_per_row;
    // Every block of the row merges all of the row's partials (a few dozen): cheaper than a third
    // kernel, and every block gets the identical result.
    const RowStats* row_partials = partials + row * layout.chunks_per_row;
    RowStats stats = empty_stats();
    for (int64_t c = threadIdx.x; c < layout.chunks_per_row; c += kThreads) stats = merge_stats(stats, row_partials[c]);
    stats = block_allreduce(stats, MergeOp{}, scratch);

    const int64_t chunk_begin = chunk * layout.chunk_elems;
    const int64_t chunk_end = min(chunk_begin + layout.chunk_elems, cols);
    const T* x_row = x + row * cols;
    T* y_row = y + row * cols;
    const float inv_row_sum = 1.0f / stats.sum;
    float values[kVec];
    for (int64_t col = chunk_begin + threadIdx.x * kVec; col < chunk_end; col += kThreads * kVec) {
      load_pack<T, kVec>(x_row + col, values);
#pragma unroll
      for (int i = 0; i < kVec; ++i) values[i] = probability(values[i], stats.max, inv_row_sum);
      store_pack<T, kVec>(y_row + col, values);
    }
    if (lse != nullptr && chunk == 0 && threadIdx.x == 0) lse[row] = lse_from_stats(stats.max, stats.sum);
  }
}

ChunkLayout chunk_layout(const SoftmaxProblem& p, int vec) {
  const int64_t target_blocks = kTargetBlocksPerSm * (p.sm_count > 0 ? p.sm_count : 1);
  int64_t chunks = (target_blocks + p.rows - 1) / p.rows;
  const int64_t max_chunks = (p.cols + kMinChunkElems - 1) / kMinChunkElems;
  if (chunks > max_chunks) chunks = max_chunks;
  if (chunks < 1) chunks = 1;
  int64_t chunk_elems = (p.cols + chunks - 1) / chunks;
  chunk_elems = (chunk_elems + vec - 1) / vec * vec;  // vectors never straddle chunks
  return {(p.cols + chunk_elems - 1) / chunk_elems, chunk_elems};
}

template <typename T, int kVec>
Status launch_chunks(const SoftmaxProblem& p) {
  const ChunkLayout layout = chunk_layout(p, kVec);
  const int64_t pairs = p.rows * layout.chunks_per_row;
  RowStats* partials = nullptr;
  FC_CUDA_RETURN(cudaMallocAsync(reinterpret_cast<void**>(&partials), size_t(pairs) * sizeof(RowStats), p.stream));
  chunk_stats_kernel<T, kVec><<<grid_for(pairs), kThreads, 0, p.stream>>>(static_cast<const T*>(p.x), partials,
                                                                        p.rows, p.cols, layout);
  cudaError_t launch_error = cudaGetLastError();
  if (launch_error == cudaSuccess) {
    chunk_write_kernel<T, kVec><<<grid_for(pairs), kThreads, 0, p.stream>>>(
        static_cast<const T*>(p.x), static_cast<T*>(p.y), p.lse, partials, p.rows, p.cols, layout);
    launch_error = cudaGetLastError();
  }
  // Free the workspace whatever happened (stream-ordered: after the kernels that use it).
  const cudaError_t free_error = cudaFreeAsync(partials, p.stream);
  FC_CUDA_RETURN(launch_error);
  FC_CUDA_RETURN(free_error);
  return Status::Ok();
}

}  // namespace

Status launch_multi_block(const SoftmaxProblem& p) {
  const bool vectorized = rows_are_vector_aligned(p);
  return dispatch_dtype(p.dtype, [&](auto tag) {
    using T = decltype(tag);
    return vectorized ? launch_chunks<T, kFullVec<T>>(p) : launch_chunks<T, 1>(p);
  });
}

}  // namespace flashcore::softmax
