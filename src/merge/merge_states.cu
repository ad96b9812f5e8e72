// The merge kernel: o = w_a o_a + w_b o_b per row (b, s, h), with the weights and lse of
// merge::row_weights (merge_states.hpp), the same math as the CPU implementation.
//
// A block of kThreads threads takes kThreads / lanes rows at a time, `lanes` threads per row
// (the power of two >= the row's accesses, at most a warp). First one thread per row forms the
// row's weights (one fp64 exp) into shared memory; after a barrier it writes the row's lse while the
// row's lanes stride over head_dim, in 16-byte vectors where the layout allows it, else element by
// element (each lane's first access is loaded before the barrier).
// In place (o == o_a, lse == lse_a) is safe: each element is read and then written by one thread.
#include <algorithm>
#include <type_traits>

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "common/cuda_check.hpp"
#include "common/device_dtype.cuh"
#include "merge/merge_states.hpp"

namespace flashcore::merge {
namespace {

constexpr int kThreads = 256;
constexpr int kVectorBytes = 16;
constexpr int64_t kMaxBlocks = int64_t(1) << 20;  // the grid strides over rows beyond this

template <typename T>
struct alignas(kVectorBytes) Vector {
  static constexpr int kSize = kVectorBytes / int(sizeof(T));
  T v[kSize];
};

struct RowIndex {
  int64_t b, s, h;
};

FC_DEVICE RowIndex row_index(const MergeStatesParams& p, int64_t row) {
  const int64_t h = row % p.heads;
  const int64_t bs = row / p.heads;
  return {bs / p.seqlen, bs % p.seqlen, h};
}

// One access of a row: a 16-byte vector (kVectorized) or one element.
template <typename T, bool kVectorized>
struct Access {
  using Type = std::conditional_t<kVectorized, Vector<T>, T>;
  static constexpr int kElems = kVectorized ? Vector<T>::kSize : 1;
};

template <typename T>
FC_DEVICE T blend_one(float w_a, T x, float w_b, T y) {
  return from_float<T>(blend(w_a, to_float(x), w_b, to_float(y)));
}
template <typename T>
FC_DEVICE Vector<T> blend_one(float w_a, const Vector<T>& x, float w_b, const Vector<T>& y) {
  Vector<T> z;
#pragma unroll
  for (int e = 0; e < Vector<T>::kSize; ++e) z.v[e] = from_float<T>(blend(w_a, to_float(x.v[e]), w_b, to_float(y.v[e])));
  return z;
}

template <typename T, bool kVectorized>
__global__ void __launch_bounds__(kThreads) merge_states_kernel(const MergeStatesParams p, int64_t rows, int lanes) {
  using A = typename Access<T, kVectorized>::Type;
  // Two buffers, alternating by iteration: the weights of the next rows are written while lanes may
  // still read this iteration's, so one barrier per iteration suffices.
  __shared__ float s_w_a[2][kThreads];
  __shared__ float s_w_b[2][kThreads];
  const int rows_per_block = kThreads / lanes;
  const int group = threadIdx.x / lanes;
  const int lane = threadIdx.x % lanes;
  const int accesses = p.head_dim / Access<T, kVectorized>::kElems;

  // The loop bound is the same for every thread of the block: the barrier below is reached by all.
  int buffer = 0;
  for (int64_t first = int64_t(blockIdx.x) * rows_per_block; first < rows;
       first += int64_t(gridDim.x) * rows_per_block, buffer ^= 1) {
    // One thread per row (the block's first threads): the row's weights, shared with its lanes.
    const bool forms_weights = threadIdx.x < rows_per_block && first + threadIdx.x < rows;
    RowIndex weights_row{};
    float lse_a = 0.0f, lse_b = 0.0f;
    if (forms_weights) {
      weights_row = row_index(p, first + threadIdx.x);
      const RowIndex& r = weights_row;
      lse_a = p.lse_a[r.b * p.lse_a_batch_stride + r.h * p.lse_a_head_stride + r.s];
      lse_b = p.lse_b[r.b * p.lse_b_batch_stride + r.h * p.lse_b_head_stride + r.s];
      const RowWeights w = row_weights(lse_a, lse_b);
      s_w_a[buffer][threadIdx.x] = w.w_a;
      s_w_b[buffer][threadIdx.x] = w.w_b;
    }
    const int64_t row = first + group;
    const bool active = row < rows;
    const A* a = nullptr;
    const A* b = nullptr;
    A* o = nullptr;
    A x0{}, y0{};
    if (active) {
      const RowIndex r = row_index(p, row);
      a = reinterpret_cast<const A*>(static_cast<const T*>(p.o_a) + r.b * p.o_a_batch_stride +
                                     r.s * p.o_a_seq_stride + r.h * p.o_a_head_stride);
      b = reinterpret_cast<const A*>(static_cast<const T*>(p.o_b) + r.b * p.o_b_batch_stride +
                                     r.s * p.o_b_seq_stride + r.h * p.o_b_head_stride);
      o = reinterpret_cast<A*>(static_cast<T*>(p.o) + r.b * p.o_batch_stride + r.s * p.o_seq_stride +
                               r.h * p.o_head_stride);
      // The first access does not depend on the weights: issued before the barrier, so that in the
      // warps that form no weights its latency overlaps the weights' (lse loads, fp64 math).
      if (lane < accesses) x0 = a[lane], y0 = b[lane];
    }
    __syncthreads();  // orders the weight writes above before the row lanes read them below
    // The merged lse is needed by no lane: formed after the barrier, off the lanes' critical path.
    // (lse == lse_a in place: this thread read lse_a above, and no other thread reads it.)
    if (forms_weights && p.lse != nullptr) {
      const RowIndex& r = weights_row;
      p.lse[r.b * p.lse_batch_stride + r.h * p.lse_head_stride + r.s] = row_lse(lse_a, lse_b);
    }
    if (active) {
      const float w_a = s_w_a[buffer][group], w_b = s_w_b[buffer][group];
      if (lane < accesses) o[lane] = blend_one(w_a, x0, w_b, y0);
      for (int i = lane + lanes; i < accesses; i += lanes) o[i] = blend_one(w_a, a[i], w_b, b[i]);
    }
  }
}

template <typename T>
Status launch_typed(const MergeStatesParams& p, cudaStream_t stream) {
  const int64_t rows = int64_t(p.batch) * p.seqlen * p.heads;
  const bool vectorized = can_use_vector_loads(p);
  const int accesses = vectorized ? p.head_dim / Vector<T>::kSize : p.head_dim;
  int lanes = 1;
  while (lanes < accesses && lanes < 32) lanes *= 2;
  const int64_t rows_per_block = kThreads / lanes;
  const int64_t blocks = std::min((rows + rows_per_block - 1) / rows_per_block, kMaxBlocks);
  if (vectorized) {
    merge_states_kernel<T, true><<<unsigned(blocks), kThreads, 0, stream>>>(p, rows, lanes);
  } else {
    merge_states_kernel<T, false><<<unsigned(blocks), kThreads, 0, stream>>>(p, rows, lanes);
  }
  FC_CHECK_LAUNCH("merge_states_kernel");
  return Status::Ok();
}

}  // namespace

Status launch_merge_states(const MergeStatesParams& p, cudaStream_t stream) {
  switch (p.dtype) {
    case DType::kFloat16: return launch_typed<__half>(p, stream);
    case DType::kBFloat16: return launch_typed<__nv_bfloat16>(p, stream);
    case DType::kFloat32: return launch_typed<float>(p, stream);
  }
  return Status::Internal("merge_attention_states: unknown dtype reached the launch");
}

}  // namespace flashcore::merge
