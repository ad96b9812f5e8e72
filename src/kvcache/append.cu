// attention_with_kvcache's kernels: the append of k_new / v_new into the cache (rotating k_new), the
// rotation of q into a temporary, and the per-entry key counts after the append. One block per row
// (entry, token, head), its threads striding over the head dim; the grid strides over rows beyond
// kMaxBlocks. The rules of each element (target row, clamping, rotary position, the rotation) are
// rotary.hpp's, so the host implementation writes the same bits. The cache is addressed only through
// attn::kv_row_offset (dense, batch-indexed and paged caches alike).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "attention/mask.hpp"
#include "common/cuda_check.hpp"
#include "common/device_dtype.cuh"
#include "kvcache/append.hpp"
#include "kvcache/rotary.hpp"

namespace flashcore::kvcache {
namespace {

constexpr int kThreads = 128;
constexpr int64_t kMaxBlocks = int64_t(1) << 16;

unsigned grid_for(int64_t rows) { return unsigned(rows < kMaxBlocks ? rows : kMaxBlocks); }

// dst[0, dim) = src[0, dim), the first rotary_dim features rotated by the cos/sin row at `pos` when
// `rotary`; the other features are copied bit for bit. src and dst never alias.
template <typename T>
FC_DEVICE void write_row(const KvCacheParams& p, const T* __restrict__ src, T* __restrict__ dst, int dim, bool rotary,
                         int64_t pos) {
  const T* cos_row = static_cast<const T*>(p.rotary_cos) + pos * (p.rotary_dim / 2);
  const T* sin_row = static_cast<const T*>(p.rotary_sin) + pos * (p.rotary_dim / 2);
  for (int d = threadIdx.x; d < dim; d += blockDim.x) {
    if (rotary && d < p.rotary_dim) {
      const RotaryPair r = rotary_pair(d, p.rotary_dim, p.rotary_interleaved);
      dst[d] = from_float<T>(rotate(to_float(src[d]), to_float(src[r.partner]), to_float(cos_row[r.m]),
                                    to_float(sin_row[r.m]), r.first));
    } else {
      dst[d] = src[d];
    }
  }
}

template <typename T>
__global__ void __launch_bounds__(kThreads) append_kernel(const KvCacheParams p, int64_t rows) {
  const AttentionParams& a = p.attention;
  const bool rotary = p.rotary_cos != nullptr;
  for (int64_t job = blockIdx.x; job < rows; job += gridDim.x) {
    const int h = int(job % a.heads_kv);
    const int64_t token = job / a.heads_kv;
    const int i = int(token % p.seqlen_new);
    const int b = int(token / p.seqlen_new);
    const int64_t row = cached_rows(p, b) + i;
    if (!new_key_written(p, row)) continue;  // the same answer for the whole block
    const T* k_src = static_cast<const T*>(p.k_new) + b * p.k_new_batch_stride + i * p.k_new_seq_stride +
                     h * p.k_new_head_stride;
    const T* v_src = static_cast<const T*>(p.v_new) + b * p.v_new_batch_stride + i * p.v_new_seq_stride +
                     h * p.v_new_head_stride;
    T* k_dst = const_cast<T*>(static_cast<const T*>(a.k)) +
               attn::kv_row_offset(a, a.k_batch_stride, a.k_seq_stride, a.k_head_stride, b, row, h);
    T* v_dst = const_cast<T*>(static_cast<const T*>(a.v)) +
               attn::kv_row_offset(a, a.v_batch_stride, a.v_seq_stride, a.v_head_stride, b, row, h);
    write_row(p, k_src, k_dst, a.head_dim_qk, rotary, row);
    write_row(p, v_src, v_dst, a.head_dim_v, false, 0);
  }
}

template <typename T>
__global__ void __launch_bounds__(kThreads) rotate_q_kernel(const KvCacheParams p, T* q_rot, int64_t rows) {
  const AttentionParams& a = p.attention;
  for (int64_t job = blockIdx.x; job < rows; job += gridDim.x) {  // job = (b * Sq + i) * Hq + h
    const int h = int(job % a.heads_q);
    const int64_t token = job / a.heads_q;
    const int i = int(token % a.seqlen_q);
    const int b = int(token / a.seqlen_q);
    const T* src = static_cast<const T*>(a.q) + b * a.q_batch_stride + i * a.q_seq_stride + h * a.q_head_stride;
    write_row(p, src, q_rot + job * a.head_dim_qk, a.head_dim_qk, true, query_position(p, b, i));
  }
}

__global__ void keys_after_append_kernel(const KvCacheParams p, int32_t* keys) {
  const int b = blockIdx.x * blockDim.x + threadIdx.x;
  if (b < p.attention.batch) keys[b] = keys_after_append(p, b);
}

template <typename T>
Status append_typed(const KvCacheParams& p, cudaStream_t stream) {
  const int64_t rows = int64_t(p.attention.batch) * p.seqlen_new * p.attention.heads_kv;
  if (rows == 0) return Status::Ok();
  append_kernel<T><<<grid_for(rows), kThreads, 0, stream>>>(p, rows);
  FC_CHECK_LAUNCH("kvcache append_kernel");
  return Status::Ok();
}

template <typename T>
Status rotate_q_typed(const KvCacheParams& p, void* q_rot, cudaStream_t stream) {
  const int64_t rows = int64_t(p.attention.batch) * p.attention.seqlen_q * p.attention.heads_q;
  if (rows == 0) return Status::Ok();
  rotate_q_kernel<T><<<grid_for(rows), kThreads, 0, stream>>>(p, static_cast<T*>(q_rot), rows);
  FC_CHECK_LAUNCH("kvcache rotate_q_kernel");
  return Status::Ok();
}

}  // namespace

Status launch_keys_after_append(const KvCacheParams& p, int32_t* keys, cudaStream_t stream) {
  if (p.attention.batch == 0) return Status::Ok();
  constexpr int kBlock = 256;
  keys_after_append_kernel<<<(p.attention.batch + kBlock - 1) / kBlock, kBlock, 0, stream>>>(p, keys);
  FC_CHECK_LAUNCH("kvcache keys_after_append_kernel");
  return Status::Ok();
}

Status launch_append(const KvCacheParams& p, cudaStream_t stream) {
  switch (p.attention.dtype) {
    case DType::kFloat16: return append_typed<__half>(p, stream);
    case DType::kBFloat16: return append_typed<__nv_bfloat16>(p, stream);
    case DType::kFloat32: return append_typed<float>(p, stream);
  }
  return Status::Internal("kvcache append: unknown dtype");
}

Status launch_rotate_q(const KvCacheParams& p, void* q_rot, cudaStream_t stream) {
  switch (p.attention.dtype) {
    case DType::kFloat16: return rotate_q_typed<__half>(p, q_rot, stream);
    case DType::kBFloat16: return rotate_q_typed<__nv_bfloat16>(p, q_rot, stream);
    case DType::kFloat32: return rotate_q_typed<float>(p, q_rot, stream);
  }
  return Status::Internal("kvcache rotate_q: unknown dtype");
}

}  // namespace flashcore::kvcache
